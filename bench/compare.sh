#!/bin/bash
# compare.sh -- rankd against direct Redis and the redis-rank library, on this
# machine, in one run.
#
# Starts a redis-server and rankd on free loopback ports, measures Redis
# memory per member and per idempotency record, preloads every target with
# the same population, then runs rankd, direct and redis-rank alternately
# for each operation, ROUNDS times, and prints the median throughput, the
# p99, the CPU time per operation of each process over the measured interval
# (redis-server, rankd, the load generator) and the ratios rankd/direct and
# rankd/redis-rank (bench/summarize.py).
# rankd runs twice: CONNECTIONS blocking clients (one call each), and
# PIPELINE_CONNECTIONS clients with PIPELINE calls in flight each: by
# default 4 x 16, the 64 calls in flight that redis-rank keeps on its one
# connection. Updates also run as UpdateBatch calls of 100
# (PIPELINE_CONNECTIONS clients), and as the floor: a minimal idempotent
# script (SET NX EX, ZSCORE, ZADD) by redis-benchmark, 4 x 16 pipelined
# (peers/floor.sh), and that script with a ZREVRANK after it (floor-rank:
# the rank rankd's Update answers). Before the rows, RECORDS request-id
# records take the board's layout of record hashes to a size the rows stay
# within (below).
#
# Usage: bench/compare.sh            (after building into build/)
# Environment: BUILD=build MEMBERS=1000000 ROUNDS=3 DURATION=10 WARMUP=2
#              CONNECTIONS=64 PIPELINE_CONNECTIONS=4 PIPELINE=16 BATCH=100
#              (updates per UpdateBatch call; 0: no batch row, for a rankd
#              from before UpdateBatch)
#              RECORDS=3000000 (request-id records preloaded: below; 0:
#              none, the rows then cross the layout's doublings)
#              IO_THREADS=$(nproc) OUT=bench/results/<date>
#              RANKD=$BUILD/rankd (another rankd against the same load
#              generator: a before/after comparison)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-$root/build}
members=${MEMBERS:-1000000}
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
conns=${CONNECTIONS:-64}
pconns=${PIPELINE_CONNECTIONS:-4}
depth=${PIPELINE:-16}
batch=${BATCH:-100}
records_preload=${RECORDS:-3000000}
io_threads=${IO_THREADS:-$(nproc)}
out=${OUT:-$here/results/$(date -u +%Y%m%dT%H%M%SZ)}
bench=$build/bench/rank-bench
rankd=${RANKD:-$build/rankd}
mkdir -p "$out"
work=$(mktemp -d)

. "$here/lib.sh"

pids=()
trap 'stop_all; rm -rf "$work"' EXIT

free_port "redis_port"
start_redis "$redis_port"
redis_pid=${pids[-1]}
free_port "rankd_port"
start_rankd "$rankd_port" "$redis_port" --io-threads "$io_threads"
rcli() { redis-cli -p "$redis_port" "$@"; }
used() { rcli info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r'; }

bench_meta "MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns PIPELINE_CONNECTIONS=$pconns PIPELINE=$depth IO_THREADS=$io_threads bench/compare.sh" >"$out/meta.txt"
cat "$out/meta.txt"

# ---- memory ----
# Per member: the preload's growth without its request-id records. Per
# record: the growth from 262,144 updates into a layout of 8,192 record
# hashes, 32 records a hash, the density update.lua sizes a layout for (the
# board's meta hash rk:{board}:q is given that layout, field s, and a count
# for the previous bucket, field <k-1>, of 131,072: 16 a hash, so it does not
# shrink, and 48 a hash with the 262,144, so it does not grow; rankd's
# default window of 3600 s makes 900 s buckets).
echo "== memory"
records=262144
m0=$(used)
"$bench" --port "$rankd_port" --members "$members" --preload-only -c 16
rcli eval "for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end return 1" \
  0 'rk:{bench-0}:q*' >/dev/null
m1=$(used)
bucket=$(python3 -c 'import time; print(int(time.time() * 1000) // 900000)')
rcli hset "rk:{bench-0}:q" s 8192 "$((bucket - 1))" 131072 >/dev/null
m2=$(used)
"$bench" --port "$rankd_port" --members "$members" --mix update=1 \
  --requests "$records" --warmup 0 -c 16 --json >"$out/records.json"
m3=$(used)
counted=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ops"]["update"]["count"])' "$out/records.json")
m4=$(used)
rcli eval "for i=0,$((members - 1)) do redis.call('ZADD','plain:{memory}', i, 'm'..i) end return 1" 0 >/dev/null
m5=$(used)
rcli del 'plain:{memory}' >/dev/null
python3 - "$m0" "$m1" "$m2" "$m3" "$m4" "$m5" "$members" "$counted" >"$out/memory.txt" <<'EOF2'
import sys
m0, m1, m2, m3, m4, m5, members, records = map(int, sys.argv[1:])
per_member = (m1 - m0) / members
per_record = (m3 - m2) / records
plain = (m5 - m4) / members
# At a steady rate a record is kept 1 to 1.5 windows (its hash is swept
# every 2 buckets): the peak holds 1.5 windows.
peak = per_record * 10000 * 3600 * 1.5 / 2**30
print(f"member, rankd layout: {per_member:.0f} B")
print(f"member, plain ZADD:   {plain:.0f} B")
print(f"ratio rankd/plain:    {per_member / plain:.2f}x")
print(f"request-id record:    {per_record:.1f} B "
      f"(1 h window at 10k updates/s: peak {peak:.2f} GiB)")
EOF2
cat "$out/memory.txt"

# ---- preload ----
echo "== preload"
"$bench" --direct "127.0.0.1:$redis_port" --members "$members" --preload-only -c 16
sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
  --members "$members" --preload
sh "$here/peers/floor.sh" --redis "127.0.0.1:$redis_port" \
  --members "$members" --preload

# Request-id records: RECORDS updates with request ids of their own (UpdateBatch
# calls of 100), so that the rows measure a board whose layout of record
# hashes holds, as a board's does once its window is full at a steady rate.
# With the memory step's records, 3,000,000 take the layout past its doubling
# at 3,145,728 records (65,536 to 131,072 hashes) and finish the move; the
# rows of one round add about 1.2 M (at 2026-11 rates), under the next
# doubling at 6,291,456. A doubling costs a growing board a move of every
# record, which one row would pay for all (bench/README.md, "What a layout's
# growth costs"); row says when a row moved records all the same.
if [ "$records_preload" -gt 0 ]; then
  echo "== request-id records"
  "$bench" --port "$rankd_port" --members "$members" --mix batch=1 \
    --batch 100 -c "$pconns" --pipeline 4 --warmup 0 \
    --requests "$((records_preload / 100))" >/dev/null
  # The move a doubling started is finished by the calls after it.
  for _ in $(seq 1 100); do
    [ "$(record_layout "$redis_port" bench-0 | wc -w)" -le 1 ] && break
    "$bench" --port "$rankd_port" --members "$members" --mix batch=1 \
      --batch 100 -c "$pconns" --pipeline 4 --warmup 0 --requests 100 >/dev/null
  done
  echo "request-id record hashes (size, size left): $(record_layout "$redis_port" bench-0)"
fi

# ---- rounds ----
# The board's layout of request-id record hashes (its size, and the size it
# is leaving while records move). The update rows add records, and when a
# row takes the board past 48 records a hash the layout doubles and every
# live record moves during that row, at a cost per update that one row
# pays (bench/README.md): row runs a row's command and says, on stderr and
# in layout.txt, when it moved records.
row() { # name command... (its stdout is the caller's)
  local name=$1 before after
  shift
  before=$(record_layout "$redis_port" bench-0)
  "$@"
  after=$(record_layout "$redis_port" bench-0)
  if [ "$before" != "$after" ]; then
    echo "$name: request-id record hashes (size, size left) '$before' -> '$after': records moved during this row" |
      tee -a "$out/layout.txt" >&2
  fi
}
for round in $(seq 1 "$rounds"); do
  for op in update rank top; do
    echo "== round $round: $op"
    row "r$round $op rankd" \
      "$bench" --port "$rankd_port" --members "$members" --mix "$op=1" \
      -c "$conns" -d "$duration" -w "$warmup" --json \
      --cpu "redis=$redis_pid,rankd=$rankd_pid" \
      >"$out/r$round-$op-rankd.json"
    row "r$round $op rankd-pipelined" \
      "$bench" --port "$rankd_port" --members "$members" --mix "$op=1" \
      -c "$pconns" --pipeline "$depth" -d "$duration" -w "$warmup" --json \
      --cpu "redis=$redis_pid,rankd=$rankd_pid" \
      >"$out/r$round-$op-rankd-pipelined.json"
    row "r$round $op direct" \
      "$bench" --direct "127.0.0.1:$redis_port" --members "$members" \
      --mix "$op=1" -c "$conns" -d "$duration" -w "$warmup" --json \
      --cpu "redis=$redis_pid" >"$out/r$round-$op-direct.json"
    sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
      --members "$members" --op "$op" --inflight "$conns" \
      --duration "$duration" --warmup "$warmup" --json \
      --cpu "redis=$redis_pid" >"$out/r$round-$op-redis-rank.json"
    if [ "$op" = update ] && [ "$batch" -gt 0 ]; then
      # UpdateBatch calls (CPU per update).
      row "r$round update rankd-batch" \
        "$bench" --port "$rankd_port" --members "$members" --mix batch=1 \
        --batch "$batch" -c "$pconns" -d "$duration" -w "$warmup" --json \
        --cpu "redis=$redis_pid,rankd=$rankd_pid" \
        >"$out/r$round-update-rankd-batch.json"
    fi
    if [ "$op" = update ]; then
      # The minimal script's floor.
      sh "$here/peers/floor.sh" --redis "127.0.0.1:$redis_port" \
        --pid "$redis_pid" --members "$members" \
        >"$out/r$round-update-floor.json"
      # The same with the rank after the update, which rankd's Update
      # answers and the minimal script does not.
      sh "$here/peers/floor.sh" --redis "127.0.0.1:$redis_port" \
        --pid "$redis_pid" --members "$members" --rank \
        >"$out/r$round-update-floor-rank.json"
    fi
  done
done

python3 "$here/summarize.py" "$out" | tee "$out/summary.md"
echo "results in $out"
