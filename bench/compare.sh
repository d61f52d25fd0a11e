#!/bin/bash
# compare.sh -- rankd against direct Redis and the redis-rank library, on this
# machine, in one run.
#
# Starts a redis-server and rankd on free loopback ports, measures Redis
# memory per member and per idempotency record, preloads every target with
# the same population, then runs rankd, direct and redis-rank alternately
# for each operation, ROUNDS times, and prints the median throughput, the
# p99 and the ratios rankd/direct and rankd/redis-rank (bench/summarize.py).
#
# Usage: bench/compare.sh            (after building into build/)
# Environment: BUILD=build MEMBERS=1000000 ROUNDS=3 DURATION=10 WARMUP=2
#              CONNECTIONS=64 IO_THREADS=1 OUT=bench/results/<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-$root/build}
members=${MEMBERS:-1000000}
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
conns=${CONNECTIONS:-64}
io_threads=${IO_THREADS:-1}
out=${OUT:-$here/results/$(date -u +%Y%m%dT%H%M%SZ)}
bench=$build/bench/rank-bench
rankd=$build/rankd
mkdir -p "$out"
work=$(mktemp -d)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # port pid
  for _ in $(seq 1 600); do
    if ! kill -0 "$2" 2>/dev/null; then return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05 # polling a condition, with a bound
  done
  return 1
}

cleanup() {
  [ -n "${rankd_pid:-}" ] && kill "$rankd_pid" 2>/dev/null || true
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
  --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
wait_port "$redis_port" "$redis_pid" || { echo "redis-server did not start" >&2; exit 1; }
rankd_port=$(free_port)
"$rankd" --listen "127.0.0.1:$rankd_port" --redis "127.0.0.1:$redis_port" \
  --io-threads "$io_threads" >"$work/rankd.log" 2>&1 &
rankd_pid=$!
wait_port "$rankd_port" "$rankd_pid" || { echo "rankd did not start" >&2; exit 1; }
rcli() { redis-cli -p "$redis_port" "$@"; }
used() { rcli info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r'; }

{
  echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "redis: $(redis-server --version | awk '{print $3}')"
  echo "command: MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns IO_THREADS=$io_threads bench/compare.sh"
  echo "rankd commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$out/meta.txt"
cat "$out/meta.txt"

# ---- memory ----
echo "== memory"
m0=$(used)
"$bench" --port "$rankd_port" --members "$members" --preload-only -c 16
m1=$(used)
"$bench" --port "$rankd_port" --members "$members" --mix update=1 \
  --requests 200000 --warmup 0 -c 16 --json >"$out/records.json"
m2=$(used)
records=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ops"]["update"]["count"])' "$out/records.json")
m3=$(used)
rcli eval "for i=0,$((members - 1)) do redis.call('ZADD','plain:{memory}', i, 'm'..i) end return 1" 0 >/dev/null
m4=$(used)
rcli del 'plain:{memory}' >/dev/null
python3 - "$m0" "$m1" "$m2" "$m3" "$m4" "$members" "$records" >"$out/memory.txt" <<'EOF'
import sys
m0, m1, m2, m3, m4, members, records = map(int, sys.argv[1:])
per_record = (m2 - m1) / records
per_member = (m1 - m0 - members * per_record) / members
plain = (m4 - m3) / members
print(f"idempotency record: {per_record:.0f} B "
      f"(default 1 h window at 10k updates/s: {per_record * 36e6 / 2**30:.2f} GiB)")
print(f"member, rankd layout: {per_member:.0f} B")
print(f"member, plain ZADD:   {plain:.0f} B")
print(f"ratio rankd/plain:    {per_member / plain:.2f}x")
EOF
cat "$out/memory.txt"

# ---- preload ----
echo "== preload"
"$bench" --direct "127.0.0.1:$redis_port" --members "$members" --preload-only -c 16
sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
  --members "$members" --preload

# ---- rounds ----
for round in $(seq 1 "$rounds"); do
  for op in update rank top; do
    echo "== round $round: $op"
    "$bench" --port "$rankd_port" --members "$members" --mix "$op=1" \
      -c "$conns" -d "$duration" -w "$warmup" --json \
      >"$out/r$round-$op-rankd.json"
    "$bench" --direct "127.0.0.1:$redis_port" --members "$members" \
      --mix "$op=1" -c "$conns" -d "$duration" -w "$warmup" --json \
      >"$out/r$round-$op-direct.json"
    sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
      --members "$members" --op "$op" --inflight "$conns" \
      --duration "$duration" --warmup "$warmup" --json \
      >"$out/r$round-$op-redis-rank.json"
  done
done

python3 "$here/summarize.py" "$out" | tee "$out/summary.md"
echo "results in $out"
