#!/bin/bash
# queue.sh -- the update queue against synchronous updates, in one run.
#
# One redis-server and one rankd (config: boards sb-0 and ub-0 plain, qb-0
# with queue=on), each row on a board of its own, each board preloaded with
# MEMBERS members. Each board's layout of request-id records is then grown
# once (warm_layout), so that every row starts on the same layout with the
# same room and none pays for moving records. Rows, each with the CPU us
# per update of redis-server and rankd over its interval (from /proc, user +
# system):
#   1. synchronous UpdateBatch of BATCH, CONNECTIONS connections, DURATION s
#      (on sb-0);
#   2. synchronous Update, CONNECTIONS x 16 pipelined, DURATION s (on ub-0);
#   3. through the queue: Enqueue of BATCH, CONNECTIONS connections, as fast
#      as answered, as many updates as row 1 measured (so that its board
#      gains as many records), then until the drain has applied every
#      update: updates / (enqueue start .. drained) is the sustained rate.
# Then a burst: BURST seconds of Enqueue at 3x row 3's sustained rate
# (rank-bench --rate), the backlog sampled every 0.5 s until drained, drawn
# with gnuplot into backlog.png (the samples in backlog.tsv).
#
# Usage: bash bench/queue.sh
# Environment: BUILD (default build/), MEMBERS (default 1000000),
# DURATION (default 20), BURST (default 30), CONNECTIONS (default 4),
# BATCH (default 100), OUT (default bench/results/queue-<time>).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup queue
members=${MEMBERS:-1000000}
duration=${DURATION:-20}
burst=${BURST:-30}
conns=${CONNECTIONS:-4}
batch=${BATCH:-100}
rankctl=$build/rankctl

bench_meta "MEMBERS=$members DURATION=$duration BURST=$burst CONNECTIONS=$conns BATCH=$batch bash bench/queue.sh" | tee "$out/summary.txt"

cat >"$work/rankd.conf" <<EOF
[board sb-0]
[board ub-0]
[board qb-0]
queue=on
# Enqueue runs as fast as it is answered: the backlog may pass the default.
queue_max_backlog=50000000
EOF
free_port "redis_port"
free_port "rankd_port"
start_redis "$redis_port"
redis_pid=${pids[-1]}
start_rankd "$rankd_port" "$redis_port" --config "$work/rankd.conf"
export RANKCTL_CONNECT=127.0.0.1:$rankd_port
# Every board holds every member before the rows, so that each row works on
# a board of the same size: an empty board's first updates cost Redis less,
# and the queue row, the longest, would otherwise end on the largest board.
for prefix in sb ub qb; do
  "$bench" -p "$rankd_port" --members "$members" --preload-only -c 16 \
    --board-prefix "$prefix" >/dev/null 2>&1
done

# Each board's request-id records are then taken past the next doubling of
# their layout, and the move to the new layout finished, before any row:
# the preload leaves a board at an arbitrary distance from a doubling, and
# a row that crosses one pays for moving every live record (bench/README.md).
# After this every board starts its row on the same layout with room for
# as many records again as it holds, so no row should cross one (moved
# below says if one did).
warm_layout() { # board-prefix
  local board=$1-0 start size left steps=200 step_s=2
  start=$(record_layout "$redis_port" "$board")
  for _ in $(seq 1 "$steps"); do
    "$bench" -p "$rankd_port" --members "$members" -d "$step_s" -w 0 -c "$conns" \
      --board-prefix "$1" --mix batch=1 --batch "$batch" >/dev/null 2>&1
    read -r size left <<<"$(record_layout "$redis_port" "$board")"
    if [ "$size" != "${start%% *}" ] && [ -z "$left" ]; then
      echo "warm: $board's request-id record hashes (size, size left) '$start' -> '$size'" |
        tee -a "$out/layout.txt"
      return 0
    fi
  done
  echo "warm: $board's layout did not grow in $((steps * step_s)) s of UpdateBatch" >&2
  return 1
}
warm_layout sb
warm_layout ub
warm_layout qb

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
applied() { "$rankctl" --json queue-status qb-0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["applied"])'; }
backlog() { "$rankctl" --json queue-status qb-0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["backlog"])'; }
wait_drained() {
  until [ "$(backlog)" = 0 ]; do sleep 0.05; done # polling a condition
}
row() { # label updates seconds redis-ticks rankd-ticks
  python3 - "$@" "$ticks" <<'EOF'
import sys
label, n, secs, r, k, hz = sys.argv[1:]
n, secs, hz = int(n), float(secs), int(hz)
us = lambda t: int(t) / hz * 1e6 / n
print("| %s | %s | %.2f | %.2f |" % (label, format(round(n / secs), ","),
                                      us(r), us(k)))
EOF
}

# A row that takes a board's request-id records past a doubling of its
# layout of record hashes moves every live record, at a cost its updates
# pay (bench/README.md): moved says so, on stderr and in layout.txt, as
# compare.sh does.
moved() { # row-name board layout-before
  local after
  after=$(record_layout "$redis_port" "$2")
  if [ "$3" != "$after" ]; then
    echo "$1: $2's request-id record hashes (size, size left) '$3' -> '$after': records moved during this row (or its warm-up)" |
      tee -a "$out/layout.txt" >&2
  fi
}

# A synchronous row by rank-bench (its own count and interval).
sync_row() { # label board-prefix rank-bench args...
  local label=$1 prefix=$2
  shift 2
  local json before
  before=$(record_layout "$redis_port" "$prefix-0")
  json=$("$bench" -p "$rankd_port" --members "$members" -d "$duration" -w 2 \
    --json --board-prefix "$prefix" "$@")
  moved "$label" "$prefix-0" "$before"
  echo "$json" >>"$out/sync.jsonl"
  python3 - "$label" "$json" "$work/count-$prefix" <<'EOF'
import json, sys
label, j = sys.argv[1], json.loads(sys.argv[2])
n = sum(v["count"] for v in j["ops"].values()) * (j["batch"] if set(j["ops"]) & {"batch", "enqueue"} else 1)
open(sys.argv[3], "w").write("%d\n" % n)
cpu = j["cpu_us_per_op"]
print("| %s | %s | %.2f | %.2f |" % (label, format(round(n / j["duration_s"]), ","),
                                      cpu.get("redis", 0), cpu.get("rankd", 0)))
EOF
}

{
  echo
  echo "| updates | updates/s | Redis µs/update | rankd µs/update |"
  echo "|---|---:|---:|---:|"
  sync_row "synchronous: UpdateBatch of $batch, $conns connections" sb \
    -c "$conns" --mix batch=1 --batch "$batch" \
    --cpu "redis=$redis_pid,rankd=$rankd_pid"
  sync_row "synchronous: Update, $conns x 16 pipelined" ub \
    -c "$conns" --pipeline 16 --mix update=1 \
    --cpu "redis=$redis_pid,rankd=$rankd_pid"
  redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
  a0=$(applied)
  r0=$(cpu "$redis_pid")
  k0=$(cpu "$rankd_pid")
  before=$(record_layout "$redis_port" qb-0)
  # As many updates as row 1 measured, so that the queue's board gains as
  # many records as row 1's did.
  calls=$(($(cat "$work/count-sb") / batch))
  t0=$(date +%s.%N)
  "$bench" -p "$rankd_port" --members "$members" -n "$calls" -w 0 \
    --board-prefix qb -c "$conns" --mix enqueue=1 --batch "$batch" \
    >"$work/enqueue.txt"
  wait_drained
  moved "through the queue" qb-0 "$before"
  t1=$(date +%s.%N)
  r1=$(cpu "$redis_pid")
  k1=$(cpu "$rankd_pid")
  a1=$(applied)
  n=$((a1 - a0))
  secs=$(python3 -c "print($t1 - $t0)")
  row "through the queue: Enqueue of $batch, $conns connections, until drained" \
    "$n" "$secs" $((r1 - r0)) $((k1 - k0))
  echo "$n $secs" >"$work/sustained"
  redis-cli -p "$redis_port" INFO commandstats >"$out/commandstats.txt"
} | tee -a "$out/summary.txt"
# Where the queue row's Redis time went, per update (INFO commandstats;
# the FCALL line includes the commands update.lua runs, EVALSHA queue.lua's).
python3 - "$out/commandstats.txt" "$(cut -d' ' -f1 "$work/sustained")" <<'EOF' | tee -a "$out/summary.txt"
import re, sys
n = int(sys.argv[2])
parts = []
for line in open(sys.argv[1]):
    m = re.match(r"cmdstat_(\w+(?:\|\w+)?):calls=(\d+),usec=(\d+)", line)
    if m and m.group(1) in ("xadd", "xreadgroup", "xautoclaim", "xack", "xdel",
                            "evalsha", "fcall", "xlen"):
        parts.append("%s %.2f" % (m.group(1).upper(), int(m.group(3)) / n))
print("queue row, Redis us per update by command (commandstats): "
      + ", ".join(parts))
EOF

# The burst: 3x the sustained rate for BURST seconds.
read -r n secs <"$work/sustained"
calls=$(python3 -c "print(3 * $n / $secs / $batch)")
echo | tee -a "$out/summary.txt"
echo "burst: $burst s of Enqueue at 3x the sustained rate ($(python3 -c "print(round(3 * $n / $secs))") updates/s, rank-bench --rate $calls)" | tee -a "$out/summary.txt"
printf 't_s\tbacklog\n' >"$out/backlog.tsv"
before=$(record_layout "$redis_port" qb-0)
start=$(date +%s.%N)
"$bench" -p "$rankd_port" --members "$members" -d "$burst" -w 0 \
  --board-prefix qb -c "$conns" --mix enqueue=1 --batch "$batch" \
  --rate "$calls" >"$work/burst.txt" &
burst_pid=$!
peak=0
while :; do
  b=$(backlog)
  t=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
  printf '%s\t%s\n' "$t" "$b" >>"$out/backlog.tsv"
  [ "$b" -gt "$peak" ] && peak=$b
  if ! kill -0 "$burst_pid" 2>/dev/null && [ "$b" = 0 ]; then break; fi
  sleep 0.5 # the sampling period
done
wait "$burst_pid"
moved "burst" qb-0 "$before"
echo "burst achieved: $(grep -o '[0-9]* updates/s' "$work/burst.txt" | head -1) enqueued (rank-bench); peak backlog $peak; drained $(tail -1 "$out/backlog.tsv" | cut -f1) s after the burst began" | tee -a "$out/summary.txt"
if command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set terminal png size 900,450
set output "$out/backlog.png"
set xlabel "seconds"
set ylabel "updates waiting"
set title "Backlog of a queued board: ${burst} s of Enqueue at 3x the sustained rate"
set key off
set grid
plot "$out/backlog.tsv" using 1:2 every ::1 with lines lw 2
EOF
  echo "plot: $out/backlog.png" | tee -a "$out/summary.txt"
fi
