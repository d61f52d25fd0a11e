#!/bin/bash
# instructions.sh -- instructions redis-server runs per rankd operation,
# counted by callgrind: the figure the wall clock of a shared machine cannot
# resolve (it repeats to within a fraction of a percent).
#
# Starts redis-server under valgrind --tool=callgrind and rankd against it,
# gives MEMBERS members a score (not counted), then zeroes the counters,
# runs REQUESTS operations of OP through rank-bench (PIPELINE_CONNECTIONS
# clients with PIPELINE calls in flight each; PIPELINE_CONNECTIONS=64
# PIPELINE=1 for blocking clients) and prints the instructions Redis ran,
# divided by REQUESTS: everything Redis does for them, reading the socket
# included.
#
# OP=import counts `rankctl import` of MEMBERS generated entries
# (bench/import_gen.py, as bench/import.sh imports) into an empty board
# instead, per entry. OP=batch (UpdateBatch) and OP=enqueue (Enqueue, on a
# board with queue=on, counted until the queue has drained) send BATCH
# updates a call, and count per update: REQUESTS is then the calls.
#
# Usage: bench/instructions.sh          (after building into build/)
# Environment: BUILD=build RANKD=$BUILD/rankd OP=update MEMBERS=20000
#              REQUESTS=20000 PIPELINE_CONNECTIONS=4 PIPELINE=16
#              WARMUP=2000 (operations before the counted ones; with the
#              defaults the counted updates double the board's layout of
#              request-id record hashes, 512 to 1,024, and the moves are
#              counted; WARMUP=8000 doubles it before, for an update on a
#              board whose layout holds: bench/README)
#              IO_THREADS=1 DEDUP_WINDOW=3600 (seconds; a short one spreads
#              the request-id records over the window's time buckets, as a
#              board updated for longer than the window has them)
#              PEER=redis-rank: count the redis-rank library's operation
#              instead (bench/peers; OP rank, top or update, with
#              PIPELINE_CONNECTIONS x PIPELINE in flight on its one
#              connection, for PEER_DURATION=10 seconds: it runs by time,
#              so its count divides)
#              PEER=floor, PEER=floor-rank: count the floor's update
#              instead (bench/peers/floor.sh, 4 x 16 pipelined by
#              redis-benchmark; floor-rank answers the rank too): the
#              instructions of the baseline of bench/compare.sh's rows
#              BATCH=100 (OP=batch, enqueue: updates a call)
#              BENCH_ARGS: more rank-bench options, for the warm-up and
#              the counted operations (--without-rank: Update and
#              UpdateBatch with with_rank=false)
#              TLS=1: rank-bench reaches rankd over TLS with a client
#              certificate (rankd's --tls-listen; certificates from
#              tests/certs.py): with COUNT=rankd, what TLS costs rankd
#              COUNT=rankd: count rankd's instructions instead (rankd under
#              callgrind, redis-server as it is): rankd's own cost per
#              operation, all its threads
#              COUNT=rankctl (OP=import): count rankctl's, all of its run
#              (reading the file included)
#              RANKD_CONFIG=FILE: rankd's --config (board options: say
#              rank=competition or shards=2 in [defaults] to count
#              rank.lua's GetRank instead of the script-free one)
#              CALLGRIND_OUT=DIR: keep the callgrind dumps there, for
#              callgrind_annotate (a redis-server built with symbols first
#              in PATH names Redis's functions; Debian's has none)
# Needs valgrind (callgrind_control). Takes about a minute.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-$root/build}
rankd=${RANKD:-$build/rankd}
bench=$build/bench/rank-bench
op=${OP:-update}
members=${MEMBERS:-20000}
requests=${REQUESTS:-20000}
warmup=${WARMUP:-2000}
pconns=${PIPELINE_CONNECTIONS:-4}
depth=${PIPELINE:-16}
io_threads=${IO_THREADS:-1}
dedup_window=${DEDUP_WINDOW:-3600}
batch=${BATCH:-100}
work=$(mktemp -d)

. "$here/lib.sh"

pids=()
keep_dumps() {
  if [ -n "${CALLGRIND_OUT:-}" ]; then
    mkdir -p "$CALLGRIND_OUT" && cp "$work"/callgrind.out* "$CALLGRIND_OUT"/ 2>/dev/null || true
  fi
}
trap 'stop_all; keep_dumps; rm -rf "$work"' EXIT

count=${COUNT:-redis}
case $count in redis | rankd | rankctl) ;; *) echo "COUNT: redis, rankd or rankctl" >&2; exit 2 ;; esac
if [ "$count" = rankctl ] && [ "$op" != import ]; then
  echo "COUNT=rankctl counts OP=import only" >&2
  exit 2
fi
# Under callgrind Redis runs tens of times slower: rankd waits for it
# (--redis-timeout) rather than answer Unavailable to calls that Redis then
# applies, which the client would send again.
# Runs a process (in the background: exec keeps $! its pid), under
# callgrind if it is the one counted.
counted() { # redis|rankd command [args]
  if [ "$1" = "$count" ]; then
    shift
    exec valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$@"
  fi
  shift
  exec "$@"
}
free_port "redis_port"
counted redis redis-server --bind 127.0.0.1 --port "$redis_port" --save "" \
  --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
wait_port "$redis_port" "$redis_pid" || { echo "redis-server did not start" >&2; exit 1; }
total_instructions() {
  cat "$work"/callgrind.out.* 2>/dev/null | awk '/^summary:/{s+=$2} END{print s+0}'
}
if [ "${PEER:-}" = redis-rank ] && [ "$count" = redis ]; then
  peer() {
    sh "$here/peers/redis-rank.sh" --redis "127.0.0.1:$redis_port" \
      --members "$members" "$@"
  }
  peer --preload >/dev/null 2>&1
  peer --op "$op" --inflight "$((pconns * depth))" --warmup 0 --duration 3 \
    --json >/dev/null
  callgrind_control -z "$redis_pid" >/dev/null 2>&1
  peer --op "$op" --inflight "$((pconns * depth))" --warmup 0 \
    --duration "${PEER_DURATION:-10}" --json >"$work/peer.json"
  callgrind_control -d "$redis_pid" >/dev/null 2>&1
  count=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ops"][sys.argv[2]]["count"])' \
    "$work/peer.json" "$op")
  echo "peer: redis-rank, op=$op members=$members in flight=$((pconns * depth))"
  awk -v t="$(total_instructions)" -v n="$count" \
    'BEGIN{printf "redis instructions per %s: %.0f (%d operations)\n", "'"$op"'", t / n, n}'
  exit 0
fi
if [ "${PEER:-}" = floor ] || [ "${PEER:-}" = floor-rank ]; then
  # The floor (bench/peers/floor.sh: its script by redis-benchmark, 4 x 16
  # pipelined whatever PIPELINE_CONNECTIONS and PIPELINE say), on MEMBERS
  # members, WARMUP updates first; floor-rank answers the rank as well.
  [ "$count" = redis ] || { echo "PEER=$PEER counts Redis only" >&2; exit 2; }
  rank_flag=
  [ "$PEER" = floor-rank ] && rank_flag=--rank
  floor() { # floor.sh options
    sh "$here/peers/floor.sh" --redis "127.0.0.1:$redis_port" \
      --pid "$redis_pid" --members "$members" "$@"
  }
  floor --preload
  floor --requests "$warmup" $rank_flag >/dev/null
  callgrind_control -z "$redis_pid" >/dev/null 2>&1
  floor --requests "$requests" $rank_flag >/dev/null
  callgrind_control -d "$redis_pid" >/dev/null 2>&1
  echo "peer: $PEER, members=$members requests=$requests (4 x 16 pipelined)"
  awk -v t="$(total_instructions)" -v n="$requests" \
    'BEGIN{printf "redis instructions per update: %.0f\n", t / n}'
  exit 0
fi

free_port "rankd_port"
if [ "$op" = enqueue ] && [ -z "${RANKD_CONFIG:-}" ]; then
  # Enqueue needs a board with queue=on; Enqueue runs as fast as it is
  # answered, so the backlog may pass the default cap.
  printf '[defaults]\nqueue = on\nqueue_max_backlog = 50000000\n' >"$work/rankd.conf"
  RANKD_CONFIG=$work/rankd.conf
fi
rankd_tls=() bench_tls=()
load_port=$rankd_port
if [ "${TLS:-0}" = 1 ]; then
  make_tls_certs "$work/certs"
  free_port "tls_port"
  rankd_tls+=(--tls-listen "127.0.0.1:$tls_port")
  bench_tls=(--tls "${bench_tls[@]}")
  load_port=$tls_port
fi
counted rankd "$rankd" --listen "127.0.0.1:$rankd_port" --redis "127.0.0.1:$redis_port" \
  --io-threads "$io_threads" --dedup-window "$dedup_window" "${rankd_tls[@]}" \
  --redis-timeout 120 ${RANKD_CONFIG:+--config "$RANKD_CONFIG"} >"$work/rankd.log" 2>&1 &
rankd_pid=$!
pids+=("$rankd_pid")
wait_port "$rankd_port" "$rankd_pid" || { echo "rankd did not start" >&2; exit 1; }
if [ "$count" = rankd ]; then counted_pid=$rankd_pid; else counted_pid=$redis_pid; fi

load() { # mix requests
  "$bench" -p "$load_port" "${bench_tls[@]}" --members "$members" --mix "$1" -n "$2" \
    -w 0 -c "$pconns" --pipeline "$depth" --seed "$3" --batch "$batch" \
    ${BENCH_ARGS:-} >/dev/null
  if [ "$op" = enqueue ]; then
    # The drain is part of a queued update's cost: wait until it is done.
    # (rankd under callgrind may answer a status call late: that poll
    # fails, the next asks again.)
    until [ "$(RANKCTL_CONNECT=127.0.0.1:$rankd_port "$build/rankctl" --json queue-status bench-0 2>/dev/null |
      python3 -c 'import json,sys
try: print(json.load(sys.stdin)["backlog"])
except ValueError: print(-1)')" = 0 ]; do
      sleep 0.05 # polling a condition
    done
  fi
}
calls() { # the script calls Redis has run (FCALL: update.lua; EVALSHA: the others)
  redis-cli -p "$redis_port" INFO commandstats |
    awk -F'[:=,]' '/^cmdstat_(evalsha|fcall):/{n += $3} END{print n + 0}'
}
if [ "$op" = import ]; then
  # rankctl import of MEMBERS generated entries into an empty board, all
  # of it counted (the script's first load and compile too).
  python3 "$here/import_gen.py" "$members" csv >"$work/gen.csv"
  requests=$members
  redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
  rankctl=("$build/rankctl")
  if [ "$count" = rankctl ]; then
    rankctl=(valgrind --tool=callgrind --log-file="$work/valgrind.log"
      --callgrind-out-file="$work/callgrind.out.rankctl" "$build/rankctl")
  fi
  callgrind_control -z "$counted_pid" >/dev/null 2>&1
  RANKCTL_CONNECT=127.0.0.1:$rankd_port "${rankctl[@]}" --timeout 120 \
    import bench-0 "$work/gen.csv" >/dev/null
  callgrind_control -d "$counted_pid" >/dev/null 2>&1
else
  # The board first, then a warm-up of the operation itself (request-id
  # records of this bucket exist, the script is loaded and compiled).
  "$bench" -p "$rankd_port" --members "$members" --preload-only -c 4 >/dev/null
  load "$op=1" "$warmup" 2
  meta_before=$(redis-cli -p "$redis_port" HGETALL 'rk:{bench-0}:q' | paste -sd' ')
  layout_before=$(record_layout "$redis_port" bench-0)
  redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
  callgrind_control -z "$counted_pid" >/dev/null 2>&1
  load "$op=1" "$requests" 3
  callgrind_control -d "$counted_pid" >/dev/null 2>&1
  case $op in batch | enqueue) requests=$((requests * batch)) ;; esac
fi
unit=$op units=${op}s
case $op in batch | enqueue) unit="update ($op of $batch)" units=updates ;; esac
scripts=$(calls)
commands=$(redis-cli -p "$redis_port" INFO commandstats)
layout=$(redis-cli -p "$redis_port" HGETALL 'rk:{bench-0}:q' | paste -sd' ')
total=$(total_instructions)
echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "rankd: $rankd"
echo "op=$op members=$members requests=$requests clients=${pconns}x$depth io_threads=$io_threads dedup_window=$dedup_window"
awk -v t="$total" -v n="$requests" -v who="$count" \
  'BEGIN{printf "%s instructions per %s: %.0f\n", who, "'"$unit"'", t / n}'
awk -v s="${scripts:-0}" -v n="$requests" \
  'BEGIN{printf "script calls: %d (%.1f %s per call)\n", s, n / s, "'"$units"'"}'
if [ -n "${meta_before:-}" ]; then
  echo "request-id meta before (s: record hashes; <bucket>: records): $meta_before"
fi
echo "request-id meta after (s: record hashes; <bucket>: records): $layout"
if [ -n "${layout_before:-}" ] && [ "$layout_before" != "$(record_layout "$redis_port" bench-0)" ]; then
  echo "the layout of request-id record hashes changed during the counted operations: its moves are in the count (WARMUP sets the warm-up)"
fi
# The commands the scripts ran, per operation (INFO commandstats).
echo "$commands" | awk -F'[:=,]' -v n="$requests" \
  '/^cmdstat_/{sub("cmdstat_", "", $1); if ($1 != "evalsha" && $1 != "fcall" && $1 != "config")
    printf "  %-12s %6.2f per %s\n", $1, $3 / n, "'"$unit"'"}'
