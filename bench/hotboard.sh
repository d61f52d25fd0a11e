#!/bin/bash
# hotboard.sh -- a hot board under heavy reads: rankd with the read cache
# (read_cache=tracked), and reading from a replica (read_from=replica),
# against rankd without either and against redis-rank, with 1,000
# updates/s going to the board in the background, in one run.
#
# Starts a redis-server, a replica of it and a rankd on free loopback
# ports, with a config that caches board "cached-0" and reads "replica-0"
# from the replica; preloads "plain-0", "cached-0", "replica-0" and
# redis-rank's leaderboard with the same MEMBERS; then, ROUNDS times, for
# each read (GetTopN(10), GetTopN(100), GetRank of a random member) runs
# rankd on each of its boards (4 connections x 16 pipelined: 64 calls in
# flight) and redis-rank (`top(N)`, `find`, 64 in flight on one
# connection; on the primary), each while a second rank-bench sends 1,000
# Updates a second through a second rankd (the writers') to the board read
# (to plain-0 during redis-rank's rows, so that Redis takes the same writes
# in every row).
# Prints the median ops/s, p99 and the CPU time per read of Redis (the
# primary and the replica apart), rankd
# and the load generator over the measured interval: Redis's includes its
# share of the background updates (measured alone as the "writes only"
# row: Redis CPU per second of the updates, divided by the reads of the
# row it sits under, is what they add to each read).
#
# Usage: bench/hotboard.sh            (after building into build/)
# Environment: BUILD=build MEMBERS=1000000 ROUNDS=2 DURATION=10 WARMUP=2
#              WRITE_RATE=1000 READS="top10 top100 rank" (the reads measured)
#              OUT=bench/results/hotboard-<date>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
MEMBERS=${MEMBERS:-1000000} ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-10}
bench_setup hotboard
rate=${WRITE_RATE:-1000}
reads=${READS:-top10 top100 rank}


bench_meta "MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup WRITE_RATE=$rate READS='$reads' bench/hotboard.sh" >"$out/meta.txt"
cat "$out/meta.txt"

free_port "redis_port"
start_redis "$redis_port"
redis_pid=${pids[-1]}
free_port "replica_port"
start_redis "$replica_port" --replicaof 127.0.0.1 "$redis_port"
replica_pid=${pids[-1]}
cat >"$work/rankd.conf" <<CONF
[redis]
nodes=127.0.0.1:$redis_port
replicas=127.0.0.1:$redis_port=127.0.0.1:$replica_port

[board cached-0]
read_cache=tracked

[board replica-0]
read_from=replica
CONF
# A rankd on the config, on a free port: sets port and pid.
start_rankd() { # log-name
  free_port "port"
  "$rankd" --listen "127.0.0.1:$port" --config "$work/rankd.conf" \
    >"$work/$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_port "$port" "$pid" || { echo "rankd did not start" >&2; exit 1; }
}
start_rankd rankd
rankd_port=$port rankd_pid=$pid
# The writers' own rankd: a read through the rankd that acknowledged a
# write must see it, so a board written through the readers' rankd at
# 1,000/s would always be read from the primary (README: Reads from
# replicas).
start_rankd rankd-writer
writer_port=$port writer_pid=$pid

echo "== preload"
for board in plain cached replica; do
  "$bench" --port "$rankd_port" --members "$members" --board-prefix "$board" \
    --preload-only -c 16
done
sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
  --members "$members" --preload

# Updates at $rate/s to board for the whole of a measured run.
writes() { # board
  "$bench" --port "$writer_port" --members "$members" --board-prefix "$1" \
    --mix update=1 --rate "$rate" -c 2 -d "$((duration + warmup + 1))" -w 0 \
    --json --seed 7 >"$work/writes.json"
}

echo "== writes only"
"$bench" --port "$writer_port" --members "$members" --board-prefix plain \
  --mix update=1 --rate "$rate" -c 2 -d "$duration" -w "$warmup" --json \
  --cpu "redis=$redis_pid,replica=$replica_pid,rankd=$writer_pid" \
  >"$out/writes-only.json"

for round in $(seq 1 "$rounds"); do
  for read in $reads; do
    case $read in
    top10) mix=top=1 n=10 op=top ;;
    top100) mix=top=1 n=100 op=top ;;
    rank) mix=rank=1 n=10 op=rank ;;
    *) echo "READS: top10, top100 or rank, not $read" >&2; exit 2 ;;
    esac
    for target in plain cached replica; do
      echo "== round $round: $read, rankd $target"
      writes "$target" &
      writer=$!
      "$bench" --port "$rankd_port" --members "$members" \
        --board-prefix "$target" --mix "$mix" --top-n "$n" -c 4 --pipeline 16 \
        -d "$duration" -w "$warmup" --json \
        --cpu "redis=$redis_pid,replica=$replica_pid,rankd=$rankd_pid" \
        >"$out/r$round-$read-$target.json"
      wait "$writer"
    done
    echo "== round $round: $read, redis-rank"
    writes plain &
    writer=$!
    sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
      --members "$members" --op "$op" --top-n "$n" --inflight 64 \
      --duration "$duration" --warmup "$warmup" --json \
      --cpu "redis=$redis_pid,replica=$replica_pid" \
      >"$out/r$round-$read-redis-rank.json"
    wait "$writer"
  done
done

python3 - "$out" <<'EOF' | tee "$out/summary.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
w = json.load(open(os.path.join(out, "writes-only.json")))
wop = w["ops"]["update"]
print("writes only: %.0f updates/s, Redis %.1f us per update, %.1f ms of "
      "Redis CPU a second" % (wop["ops_per_sec"], w["cpu_us_per_op"]["redis"],
                              wop["ops_per_sec"] * w["cpu_us_per_op"]["redis"] / 1000))
print()
print("| read | target | ops/s | p99 ms | primary Redis us/op | replica Redis us/op | rankd us/op | client us/op |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for read in ("top10", "top100", "rank"):
    for target in ("plain", "cached", "replica", "redis-rank"):
        runs = [json.load(open(f)) for f in sorted(glob.glob(
            os.path.join(out, f"r*-{read}-{target}.json")))]
        if not runs:
            continue
        ops = [next(iter(r["ops"].values())) for r in runs]
        med = lambda xs: statistics.median(xs) if xs else float("nan")
        cpu = lambda n: med([r.get("cpu_us_per_op", {}).get(n) for r in runs
                             if r.get("cpu_us_per_op", {}).get(n) is not None])
        cell = lambda v: "–" if v != v else f"{v:.2f}"
        name = {"plain": "rankd", "cached": "rankd, read_cache=tracked",
                "replica": "rankd, read_from=replica",
                "redis-rank": "redis-rank"}[target]
        print(f"| {read} | {name} | {med([o['ops_per_sec'] for o in ops]):,.0f} | "
              f"{med([o['p99_us'] for o in ops]) / 1000:.2f} | {cell(cpu('redis'))} | "
              f"{cell(cpu('replica'))} | {cell(cpu('rankd'))} | {cell(cpu('client'))} |")
# Each round's rankd rows against redis-rank's in the same round.
print()
for read in ("top10", "top100", "rank"):
    for f in sorted(glob.glob(os.path.join(out, f"r*-{read}-redis-rank.json"))):
        rnd = os.path.basename(f).split("-")[0]
        lib = next(iter(json.load(open(f))["ops"].values()))["ops_per_sec"]
        cells = []
        for target in ("plain", "cached", "replica"):
            path = os.path.join(out, f"{rnd}-{read}-{target}.json")
            if os.path.exists(path):
                ops = next(iter(json.load(open(path))["ops"].values()))["ops_per_sec"]
                cells.append(f"{target} {ops:,.0f} ({ops / lib:.2f}x)")
        print(f"{rnd} {read}: redis-rank {lib:,.0f}; " + ", ".join(cells))
EOF
echo "results in $out"
