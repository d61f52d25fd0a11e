#!/bin/bash
# tls.sh -- what TLS costs: rankd's own CPU per call and Redis's, with TLS
# on the Thrift port and on the links to Redis, against plain, for each
# operation in turn, alternating within each round.
#
# One redis-server serves a plain port and a TLS port (certificates from
# tests/certs.py, client certificates required on both sides). Two rankds
# share its board:
#   plain      rank-bench -> rankd (plain listener)  -> Redis, plain
#   tls        rank-bench -> rankd (TLS listener, mutual TLS, the same
#              rankd as plain)                       -> Redis, plain
#   redis-tls  rank-bench -> rankd (plain listener)  -> Redis over TLS
# Each round runs each of OPS through them in turn, pipelined (4
# connections x 16) and blocking (64 connections, one call each); then
# prints the medians of the rounds: ops/s and the CPU time per call of
# Redis, the rankd measured and the load generator. One more row, plain@tls, is plain again held (rank-bench
# --rate) to the ops/s the TLS row reached: on 2 shared cores the client's
# own TLS work slows the whole run, and a slower run batches less in rankd
# and Redis, so the ratio at an equal rate is TLS's own cost to rankd.
# rank-bench keeps its connections for the whole run, so the
# handshakes are not in the figures; connect/handshake cost is in the
# crowd and hostile tests, not here.
#
# Usage: bash bench/tls.sh   (after building into build/ or BUILD=...)
# Environment: BUILD=build OPS="update rank top" MEMBERS=200000
#              ROUNDS=3 DURATION=5 WARMUP=1 OUT=bench/results/tls-<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-$root/build}
bench=$build/bench/rank-bench
rankd=$build/rankd
ops=${OPS:-update rank top}
members=${MEMBERS:-200000}
rounds=${ROUNDS:-3}
duration=${DURATION:-5}
warmup=${WARMUP:-1}
out=${OUT:-$here/results/tls-$(date -u +%Y%m%dT%H%M%SZ)}
work=$(mktemp -d)
mkdir -p "$out"

. "$here/lib.sh"

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap 'stop_all; rm -rf "$work"' EXIT

python3 "$root/tests/certs.py" "$work/certs" bench >/dev/null
c=$work/certs
free_port redis_port
free_port redis_tls_port
mkdir -p "$work/redis"
redis-server --bind 127.0.0.1 --port "$redis_port" --tls-port "$redis_tls_port" \
  --tls-cert-file "$c/server.pem" --tls-key-file "$c/server.key" \
  --tls-ca-cert-file "$c/ca.pem" --tls-auth-clients yes \
  --save "" --appendonly no --dir "$work/redis" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
wait_port "$redis_port" "$redis_pid" || { echo "redis-server did not start" >&2; exit 1; }

free_port plain_port
free_port tls_port
"$rankd" --listen "127.0.0.1:$plain_port" --tls-listen "127.0.0.1:$tls_port" \
  --tls-cert "$c/server.pem" --tls-key "$c/server.key" --tls-ca "$c/ca.pem" \
  --redis "127.0.0.1:$redis_port" >"$work/rankd.log" 2>&1 &
pid_a=$!
pids+=("$pid_a")
wait_port "$plain_port" "$pid_a" || { echo "rankd did not start" >&2; exit 1; }
wait_port "$tls_port" "$pid_a" || { echo "rankd's TLS port did not open" >&2; exit 1; }

free_port redis_tls_rankd_port
"$rankd" --listen "127.0.0.1:$redis_tls_rankd_port" \
  --redis "127.0.0.1:$redis_tls_port" --redis-tls --redis-tls-ca "$c/ca.pem" \
  --redis-tls-cert "$c/client-bench.pem" --redis-tls-key "$c/client-bench.key" \
  >"$work/rankd-redis-tls.log" 2>&1 &
pid_b=$!
pids+=("$pid_b")
wait_port "$redis_tls_rankd_port" "$pid_b" || { echo "rankd (Redis over TLS) did not start" >&2; exit 1; }

tls_args=(--tls --tls-ca "$c/ca.pem" --tls-cert "$c/client-bench.pem"
  --tls-key "$c/client-bench.key")

bench_meta "OPS=\"$ops\" MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup bench/tls.sh" \
  | tee "$out/meta.txt"
"$bench" --port "$plain_port" --members "$members" --preload-only -c 16 >/dev/null 2>&1

for round in $(seq 1 "$rounds"); do
  echo "== round $round"
  for op in $ops; do
  for shape in pipelined blocking; do
    if [ "$shape" = pipelined ]; then load=(-c 4 --pipeline 16); else load=(-c 64 --pipeline 1); fi
    for target in plain tls plain@tls redis-tls; do
      rate=0
      case $target in
      plain) args=(--port "$plain_port") pid=$pid_a ;;
      tls) args=(--port "$tls_port" "${tls_args[@]}") pid=$pid_a ;;
      plain@tls) # plain, held to the rate the TLS run reached
        args=(--port "$plain_port") pid=$pid_a
        rate=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["ops"][sys.argv[2]]["ops_per_sec"]))' \
          "$out/r$round-$op-$shape-tls.json" "$op") ;;
      redis-tls) args=(--port "$redis_tls_rankd_port") pid=$pid_b ;;
      esac
      "$bench" "${args[@]}" --members "$members" --mix "$op=1" "${load[@]}" \
        --rate "$rate" -d "$duration" -w "$warmup" --json \
        --cpu "redis=$redis_pid,rankd=$pid" >"$out/r$round-$op-$shape-$target.json"
    done
  done
  done
done

python3 - "$out" $ops <<'EOF' | tee "$out/summary.md"
import glob, json, os, statistics, sys

out, ops = sys.argv[1], sys.argv[2:]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "r*-*.json"))):
    _, op, shape, target = os.path.basename(path)[:-5].split("-", 3)
    d = json.load(open(path))
    cpu = d.get("cpu_us_per_op", {})
    rows.setdefault((op, shape, target), []).append(
        (d["ops"][op]["ops_per_sec"], cpu["redis"], cpu["rankd"], cpu["client"]))
med = lambda runs, i: statistics.median(r[i] for r in runs)
print("| call | ops/s | Redis µs/call | ratio | rankd µs/call | ratio | rankd, tls / plain@tls | client µs/call |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for op in ops:
    for shape in ("pipelined", "blocking"):
        base = rows.get((op, shape, "plain"))
        for target in ("plain", "tls", "plain@tls", "redis-tls"):
            runs = rows.get((op, shape, target))
            if not runs:
                continue
            same = rows.get((op, shape, "plain@tls"))
            at_rate = (f"{med(runs, 2) / med(same, 2):.2f}x"
                       if target == "tls" and same else "")
            print(f"| {op}, {shape}, {target} | {med(runs, 0):,.0f} "
                  f"| {med(runs, 1):.2f} | {med(runs, 1) / med(base, 1):.2f}x "
                  f"| {med(runs, 2):.2f} | {med(runs, 2) / med(base, 2):.2f}x "
                  f"| {at_rate} | {med(runs, 3):.2f} |")
EOF
echo "results in $out"
