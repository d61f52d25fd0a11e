#!/bin/bash
# sharding.sh -- a sharded board (10 shards) against an ordinary board, on one
# Redis node and on three, through the same rankd, in one run.
#
# For NODES in 1 and 3: starts that many redis-servers and one rankd on free
# loopback ports, with a config file that shards board "sharded-0" into 10
# (bench/README.md shows it); preloads "plain-0" and "sharded-0" with the same
# population; then runs each operation on the ordinary and on the sharded
# board alternately, ROUNDS times, and prints the median throughput and p99,
# the ratio sharded/ordinary, and the CPU time per operation of Redis (all
# nodes together) and of rankd over the measured interval.
#
# Usage: bench/sharding.sh            (after building into build/)
# Environment: BUILD=build MEMBERS=200000 ROUNDS=3 DURATION=8 WARMUP=2
#              CONNECTIONS=64 TOP_N=10 OUT=bench/results/sharding-<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
bench_setup sharding

cat >"$work/rankd.conf" <<'CONF'
[board sharded-0]
shards=10
CONF

bench_meta "MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns TOP_N=$top_n bench/sharding.sh" >"$out/meta.txt"
cat "$out/meta.txt"

for nodes in 1 3; do
  redis_args=()
  cpu=()
  for i in $(seq 1 "$nodes"); do
    free_port "port"
    start_redis "$port"
    redis_args+=(--redis "127.0.0.1:$port")
    cpu+=("redis$i=${pids[-1]}")
  done
  free_port "rankd_port"
  "$rankd" --listen "127.0.0.1:$rankd_port" --config "$work/rankd.conf" \
    "${redis_args[@]}" >"$work/rankd-$nodes.log" 2>&1 &
  pids+=($!)
  cpu+=("rankd=$!")
  wait_port "$rankd_port" "$!" || { echo "rankd did not start" >&2; exit 1; }
  echo "== $nodes node(s): preload"
  for board in plain sharded; do
    "$bench" --port "$rankd_port" --members "$members" --board-prefix "$board" \
      --preload-only -c 16
  done
  for round in $(seq 1 "$rounds"); do
    for op in update rank top; do
      for board in plain sharded; do
        echo "== $nodes node(s), round $round: $op on $board"
        "$bench" --port "$rankd_port" --members "$members" \
          --board-prefix "$board" --mix "$op=1" --top-n "$top_n" \
          -c "$conns" -d "$duration" -w "$warmup" --json \
          --cpu "$(IFS=,; echo "${cpu[*]}")" \
          >"$out/n$nodes-r$round-$op-$board.json"
      done
    done
  done
  stop_all
done

python3 "$here/summarize_pairs.py" "$out" nodes n1,n3 plain,sharded \
  ordinary,sharded | tee "$out/summary.md"
echo "results in $out"
