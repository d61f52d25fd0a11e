#!/usr/bin/env python3
"""Summarizes a bench/compare.sh results directory as a Markdown table.

For each operation and target: the median over rounds of throughput (an
UpdateBatch counts as its updates), p99 (per call) and the CPU time per
operation of each process (redis, rankd, client), and
the ratios rankd/direct and rankd/redis-rank of the medians.
Usage: summarize.py RESULTS_DIR
"""
import glob
import json
import os
import statistics
import sys

TARGETS = ["rankd", "rankd-pipelined", "rankd-batch", "direct", "redis-rank",
           "floor", "floor-rank"]
OURS = ["rankd", "rankd-pipelined", "rankd-batch"]
OPS = ["update", "rank", "top"]


def load(directory):
    runs = {}
    for path in glob.glob(os.path.join(directory, "r*-*-*.json")):
        name = os.path.basename(path)[:-5]
        _, op, target = name.split("-", 2)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        stats = data["ops"].get(op)
        if "batch" in data["ops"]:
            # UpdateBatch calls, counted as their updates (CPU per op is
            # per update already).
            stats = dict(data["ops"]["batch"])
            stats["ops_per_sec"] *= data["batch"]
            stats["count"] *= data["batch"]
        if stats:
            stats = dict(stats, cpu=data.get("cpu_us_per_op", {}))
            runs.setdefault((op, target), []).append(stats)
    return runs


def medians(runs, op):
    med = {}
    for t in TARGETS:
        r = runs.get((op, t))
        if r:
            med[t] = (statistics.median(x["ops_per_sec"] for x in r),
                      statistics.median(x["p99_us"] for x in r) / 1000,
                      sum(x["errors"] for x in r))
    return med


def cpu_medians(runs, op, target):
    """{process: median us per op} over the rounds."""
    r = runs.get((op, target), [])
    names = sorted({n for x in r for n in x["cpu"]})
    return {n: statistics.median(x["cpu"][n] for x in r if n in x["cpu"])
            for n in names}


def cell(cpu, name):
    v = cpu.get(name)
    return f"{v:.1f}" if v is not None and v >= 0 else "–"


def main(directory):
    runs = load(directory)
    print("| op | target | ops/s (median) | p99 ms | errors | "
          "Redis µs/op | rankd µs/op | client µs/op |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for op in OPS:
        for t, (ops, p99, errors) in medians(runs, op).items():
            cpu = cpu_medians(runs, op, t)
            print(f"| {op} | {t} | {ops:,.0f} | {p99:.2f} | {errors} | "
                  f"{cell(cpu, 'redis')} | {cell(cpu, 'rankd')} | "
                  f"{cell(cpu, 'client')} |")
    print()
    print("| op | rankd as | ops/s vs direct | ops/s vs redis-rank | "
          "p99 vs direct p99 |")
    print("|---|---|---:|---:|---:|")
    for op in OPS:
        med = medians(runs, op)
        for ours in OURS:
            if ours not in med:
                continue
            cells = []
            for other in ("direct", "redis-rank"):
                cells.append(f"{med[ours][0] / med[other][0]:.2f}x"
                             if other in med else "")
            p99 = (f"{med[ours][1] / med['direct'][1]:.2f}x"
                   if "direct" in med else "")
            print(f"| {op} | {ours} | {cells[0]} | {cells[1]} | {p99} |")
    floor = cpu_medians(runs, "update", "floor").get("redis")
    if floor:
        print()
        # The floor with the rank after the update: what rankd's Update
        # answers, and the floor's script does not.
        ranked = cpu_medians(runs, "update", "floor-rank").get("redis")
        print("| update as | Redis µs/update | vs the floor (minimal script) "
              "| vs the floor with its rank |")
        print("|---|---:|---:|---:|")
        for t in TARGETS:
            v = cpu_medians(runs, "update", t).get("redis")
            if v is not None and v >= 0:
                with_rank = f"{v / ranked:.2f}x" if ranked else ""
                print(f"| {t} | {v:.1f} | {v / floor:.2f}x | {with_rank} |")
        # The floor with its rank does all the floor does and more: if it
        # cost Redis less, the machine was busier under one of the two
        # (bench/README.md of 4968f11, "Latest runs"), and so may have been any row.
        if ranked and ranked < floor:
            print()
            print(f"warning: the floor with its rank cost Redis less than "
                  f"the floor alone ({ranked:.1f} < {floor:.1f} µs): the "
                  f"machine's load changed during the run; its ratios to "
                  f"the floor are not to be trusted; run it again")
    memory = os.path.join(directory, "memory.txt")
    if os.path.exists(memory):
        print()
        with open(memory, encoding="utf-8") as f:
            for line in f:
                print(f"    {line.rstrip()}")


if __name__ == "__main__":
    main(sys.argv[1])
