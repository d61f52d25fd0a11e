#!/usr/bin/env python3
"""Summarizes the results of bench/sharding.sh or bench/cluster.sh: two
setups side by side per row and operation, as a Markdown table.

Result files are named <A>-r<round>-<op>-<B>.json; one of A and B is the
column (the two setups compared), the other the row. For each: the median
over rounds of ops/s and p99, the ratio of the second column to the first,
and the median CPU time per operation of Redis (every redis* process
rank-bench watched, added up) and of rankd.

Usage: summarize_pairs.py DIR ROW_LABEL ROWS COLUMNS COLUMN_NAMES
  e.g. summarize_pairs.py results nodes n1,n3 plain,sharded ordinary,sharded
"""
import glob
import json
import os
import statistics
import sys


def load(directory, columns):
    runs = {}
    for path in glob.glob(os.path.join(directory, "*-r*-*-*.json")):
        a, _, op, b = os.path.basename(path)[:-5].split("-")
        col, row = (a, b) if a in columns else (b, a)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        stats = data["ops"].get(op)
        if stats:
            cpu = data.get("cpu_us_per_op", {})
            redis = [v for k, v in cpu.items() if k.startswith("redis")]
            stats = dict(stats, redis=sum(redis) if redis else None,
                         rankd=cpu.get("rankd"))
            runs.setdefault((row, op, col), []).append(stats)
    return runs


def median(runs, key):
    values = [x[key] for x in runs if x.get(key) is not None]
    return statistics.median(values) if values else None


def us(v):
    return f"{v:.1f}" if v is not None and v >= 0 else "–"


def main(directory, row_label, rows, columns, names):
    rows, columns, names = rows.split(","), columns.split(","), names.split(",")
    runs = load(directory, columns)
    a, b = names
    print(f"| {row_label} | op | {a} ops/s | {b} ops/s | {b}/{a} | "
          f"{a} p99 ms | {b} p99 ms | errors | "
          f"Redis µs/op {a} | Redis µs/op {b} | "
          f"rankd µs/op {a} | rankd µs/op {b} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        for op in ("update", "rank", "top"):
            r = [runs.get((row, op, c), []) for c in columns]
            if not all(r):
                continue
            ops = [median(x, "ops_per_sec") for x in r]
            p99 = [median(x, "p99_us") / 1000 for x in r]
            errors = sum(x["errors"] for runs_ in r for x in runs_)
            shown = row[1:] if row[1:].isdigit() else row
            print(f"| {shown} | {op} | {ops[0]:,.0f} | {ops[1]:,.0f} | "
                  f"{ops[1] / ops[0]:.2f}x | {p99[0]:.2f} | {p99[1]:.2f} | "
                  f"{errors} | {us(median(r[0], 'redis'))} | "
                  f"{us(median(r[1], 'redis'))} | "
                  f"{us(median(r[0], 'rankd'))} | "
                  f"{us(median(r[1], 'rankd'))} |")


if __name__ == "__main__":
    main(*sys.argv[1:6])
