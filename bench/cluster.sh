#!/bin/bash
# cluster.sh -- rankd on a Redis Cluster of three masters against rankd on
# one Redis, with an ordinary board and a board of 10 shards, in one run.
#
# Starts one redis-server, then a cluster of three (redis-cli --cluster
# create, no replicas: this measures routing and spread, not replication),
# each with its own rankd on free loopback ports; preloads "plain-0" and
# "sharded-0" (10 shards) on both; then runs each operation on each board
# against both setups alternately, ROUNDS times, and prints the median
# throughput and p99, the ratio cluster/single, and the CPU time per
# operation of Redis (all nodes of the setup) and of its rankd.
#
# Usage: bench/cluster.sh            (after building into build/)
# Environment: BUILD=build MEMBERS=200000 ROUNDS=3 DURATION=8 WARMUP=2
#              CONNECTIONS=64 TOP_N=10 OUT=bench/results/cluster-<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
bench_setup cluster

# Sets the variable named $1 to a port whose cluster bus port (+10000) is
# a valid port too.
cluster_port() { # variable
  while :; do
    free_port "$1"
    if [ "${!1}" -le 55535 ]; then return; fi
  done
}

declare -A port
start_rankd() { # name redis-args...  (sets port[name])
  local name=$1
  shift
  free_port "port[$name]"
  "$rankd" --listen "127.0.0.1:${port[$name]}" --config "$work/rankd.conf" \
    "$@" >"$work/rankd-$name.log" 2>&1 &
  pids+=($!)
  cpu[$name]="${cpu[$name]},rankd=$!"
  wait_port "${port[$name]}" "$!" || { echo "rankd did not start" >&2; exit 1; }
}

cat >"$work/rankd.conf" <<'CONF'
[board sharded-0]
shards=10
CONF

bench_meta "MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns TOP_N=$top_n bench/cluster.sh" >"$out/meta.txt"
cat "$out/meta.txt"

declare -A cpu
free_port "single"
start_redis "$single"
cpu[single]="redis1=${pids[-1]}"
seeds=()
for i in 1 2 3; do
  cluster_port p
  start_redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf
  seeds+=("127.0.0.1:$p")
  cpu[cluster]="${cpu[cluster]:+${cpu[cluster]},}redis$i=${pids[-1]}"
done
redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes \
  >"$work/create.log" 2>&1
for _ in $(seq 1 600); do
  if redis-cli -p "${seeds[0]##*:}" cluster info | grep -q cluster_state:ok; then
    break
  fi
  sleep 0.05 # polling a condition, with a bound
done

start_rankd single --redis "127.0.0.1:$single"
start_rankd cluster --redis-cluster "$(IFS=,; echo "${seeds[*]}")"
for setup in single cluster; do
  echo "== $setup: preload"
  for board in plain sharded; do
    "$bench" --port "${port[$setup]}" --members "$members" \
      --board-prefix "$board" --preload-only -c 16
  done
done
for round in $(seq 1 "$rounds"); do
  for op in update rank top; do
    for board in plain sharded; do
      for setup in single cluster; do
        echo "== round $round: $op on $board, $setup"
        "$bench" --port "${port[$setup]}" --members "$members" \
          --board-prefix "$board" --mix "$op=1" --top-n "$top_n" \
          -c "$conns" -d "$duration" -w "$warmup" --json \
          --cpu "${cpu[$setup]}" >"$out/$setup-r$round-$op-$board.json"
      done
    done
  done
done
stop_all

python3 "$here/summarize_pairs.py" "$out" board plain,sharded single,cluster \
  "one Redis,cluster" | tee "$out/summary.md"
echo "results in $out"
