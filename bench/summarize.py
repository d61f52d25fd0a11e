#!/usr/bin/env python3
"""Summarizes a bench/compare.sh results directory as a Markdown table.

For each operation and target: the median over rounds of throughput and
p99, and the ratios rankd/direct and rankd/redis-rank of the medians.
Usage: summarize.py RESULTS_DIR
"""
import glob
import json
import os
import statistics
import sys

TARGETS = ["rankd", "direct", "redis-rank"]
OPS = ["update", "rank", "top"]


def load(directory):
    runs = {}
    for path in glob.glob(os.path.join(directory, "r*-*-*.json")):
        name = os.path.basename(path)[:-5]
        _, op, target = name.split("-", 2)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        stats = data["ops"].get(op)
        if stats:
            runs.setdefault((op, target), []).append(stats)
    return runs


def main(directory):
    runs = load(directory)
    print("| op | target | ops/s (median) | p99 ms | rankd/this ops/s | "
          "rankd p99 / this p99 | errors |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for op in OPS:
        med = {}
        for t in TARGETS:
            r = runs.get((op, t))
            if r:
                med[t] = (statistics.median(x["ops_per_sec"] for x in r),
                          statistics.median(x["p99_us"] for x in r) / 1000,
                          sum(x["errors"] for x in r))
        for t in TARGETS:
            if t not in med:
                continue
            ops, p99, errors = med[t]
            ratio = p99_ratio = ""
            if t != "rankd" and "rankd" in med:
                ratio = f"{med['rankd'][0] / ops:.2f}x"
                p99_ratio = f"{med['rankd'][1] / p99:.2f}x"
            print(f"| {op} | {t} | {ops:,.0f} | {p99:.2f} | {ratio} | "
                  f"{p99_ratio} | {errors} |")
    memory = os.path.join(directory, "memory.txt")
    if os.path.exists(memory):
        print()
        with open(memory, encoding="utf-8") as f:
            for line in f:
                print(f"    {line.rstrip()}")


if __name__ == "__main__":
    main(sys.argv[1])
