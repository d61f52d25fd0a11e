#!/bin/bash
# ab.sh -- two rankd builds and redis-rank on one Redis, one operation,
# alternating: the A/B of a change, with the library as a third row.
#
# Starts one redis-server and both rankds against it (they share the board:
# the key layout must be the same), preloads MEMBERS members once through
# B and redis-rank's leaderboard, then ROUNDS times runs OP through A, then
# B (4 connections x 16 pipelined, or as CONNECTIONS, PIPELINE and RATE
# say), then redis-rank (64 in flight; PEER=none leaves it out), each
# DURATION seconds after WARMUP, and prints each row: ops/s and the CPU
# time per operation of Redis, the rankd measured and the load generator.
# Compare within a round and across the rounds' medians: the machine is
# shared.
#
# APART=1 gives each rankd a redis-server of its own, both preloaded: for a
# change to what the scripts keep in Redis's Lua heap (their libraries share
# one Lua VM in one redis-server, so the garbage collection of one build's
# runs would walk the other's data too); redis-rank then runs on B's.
#
# Usage: RANKD_A=<old build>/rankd bench/ab.sh    (after building into build/)
# Environment: BUILD=build RANKD_A (required) RANKD_B=$BUILD/rankd OP=rank
#              (rank, top or update) MEMBERS=1000000 ROUNDS=3 DURATION=10
#              WARMUP=2 CONNECTIONS=4 PIPELINE=16 RATE=0 (calls/s in all,
#              rank-bench --rate; 0: as fast as answered) PEER=redis-rank
#              OUT=bench/results/ab-<date> APART=0
# For example, updates one a script call at 1,000/s (bench/README.md of 4968f11, "update.lua
# as a function"): OP=update MEMBERS=200000 CONNECTIONS=2 PIPELINE=1
# RATE=1000 DURATION=5 WARMUP=1 PEER=none
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-$root/build}
bench=$build/bench/rank-bench
rankd_a=${RANKD_A:?RANKD_A: the rankd to compare against}
rankd_b=${RANKD_B:-$build/rankd}
op=${OP:-rank}
members=${MEMBERS:-1000000}
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
conns=${CONNECTIONS:-4}
depth=${PIPELINE:-16}
rate=${RATE:-0}
peer=${PEER:-redis-rank}
apart=${APART:-0}
out=${OUT:-$here/results/ab-$(date -u +%Y%m%dT%H%M%SZ)}
work=$(mktemp -d)
mkdir -p "$out"

. "$here/lib.sh"

pids=()
trap 'stop_all; rm -rf "$work"' EXIT

start_redis() { # -> port in $redis_port, pid in $redis_pid
  free_port "redis_port"
  mkdir -p "$work/redis-$redis_port"
  redis-server --bind 127.0.0.1 --port "$redis_port" --save "" \
    --appendonly no --dir "$work/redis-$redis_port" \
    >"$work/redis-$redis_port.log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  wait_port "$redis_port" "$redis_pid" || { echo "redis-server did not start" >&2; exit 1; }
}

start_rankd() { # binary name -> port in $port, pid in $pid
  free_port "port"
  "$1" --listen "127.0.0.1:$port" --redis "127.0.0.1:$redis_port" \
    >"$work/$2.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_port "$port" "$pid" || { echo "rankd $2 did not start" >&2; exit 1; }
}

start_redis
redis_pid_a=$redis_pid
start_rankd "$rankd_a" a
port_a=$port pid_a=$pid
if [ "$apart" = 1 ]; then
  start_redis
fi
redis_pid_b=$redis_pid
start_rankd "$rankd_b" b
port_b=$port pid_b=$pid

bench_meta "RANKD_A=$rankd_a RANKD_B=$rankd_b OP=$op MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns PIPELINE=$depth RATE=$rate PEER=$peer APART=$apart bench/ab.sh" \
  | tee "$out/meta.txt"
"$bench" --port "$port_b" --members "$members" --preload-only -c 16 >/dev/null 2>&1
if [ "$apart" = 1 ]; then
  "$bench" --port "$port_a" --members "$members" --preload-only -c 16 >/dev/null 2>&1
fi
if [ "$peer" != none ]; then
  sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
    --members "$members" --preload >/dev/null 2>&1
fi

for round in $(seq 1 "$rounds"); do
  echo "== round $round"
  for ab in a b; do
    if [ "$ab" = a ]; then
      port=$port_a pid=$pid_a redis_pid=$redis_pid_a
    else
      port=$port_b pid=$pid_b redis_pid=$redis_pid_b
    fi
    "$bench" --port "$port" --members "$members" --mix "$op=1" -c "$conns" \
      --pipeline "$depth" --rate "$rate" -d "$duration" -w "$warmup" \
      --json --cpu "redis=$redis_pid,rankd=$pid" \
      >"$out/r$round-$ab.json"
  done
  [ "$peer" = none ] || sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
    --members "$members" --op "$op" --inflight 64 --duration "$duration" \
    --warmup "$warmup" --json --cpu "redis=$redis_pid" \
    >"$out/r$round-redis-rank.json"
done

python3 - "$out" "$op" <<'EOF' | tee "$out/summary.md"
import glob, json, os, statistics, sys

out, op = sys.argv[1], sys.argv[2]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "r*-*.json"))):
    target = os.path.basename(path)[:-5].split("-", 1)[1]
    d = json.load(open(path))
    cpu = d.get("cpu_us_per_op", {})
    rows.setdefault(target, []).append(
        (d["ops"][op]["ops_per_sec"], cpu.get("redis"), cpu.get("rankd"),
         cpu.get("client")))
fmt = lambda v: "–" if v is None else f"{v:.2f}"
print(f"| {op} | round | ops/s | Redis µs/op | rankd µs/op | client µs/op |")
print("|---|---:|---:|---:|---:|---:|")
for target in ("a", "b", "redis-rank"):
    for i, (ops, redis, rankd, client) in enumerate(rows.get(target, []), 1):
        print(f"| {target} | {i} | {ops:,.0f} | {fmt(redis)} | {fmt(rankd)} | {fmt(client)} |")
    runs = rows.get(target, [])
    if runs:
        print(f"| {target} | median | {statistics.median(r[0] for r in runs):,.0f} "
              f"| {fmt(statistics.median(r[1] for r in runs))} | "
              f"{fmt(statistics.median(r[2] for r in runs) if runs[0][2] is not None else None)} "
              f"| {fmt(statistics.median(r[3] for r in runs))} |")
EOF
echo "results in $out"
