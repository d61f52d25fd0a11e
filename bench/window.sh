#!/bin/bash
# window.sh -- rolling windows (board option window=N), by hand: what a
# window adds to the updates and reads of a board, and what its daily roll
# costs, in Redis CPU, in one run.
#
# One Redis and one rankd on free loopback ports; rankd reads its clock from
# a file (RANKD_TEST_CLOCK_FILE), held at the time the run starts until the
# roll moves it one day on. Boards, all period=daily retention=6
# mode=increment (a window of them sums), each preloaded with MEMBERS
# members by rank-bench --preload-only (a SET each):
#   plain-0   no window
#   window-0  window=7
#   shard4-0  window=7 shards=4 (STEPS with "shards")
# Steps:
#   update: rank-bench's update op (--mode increment) on plain-0 and on
#       window-0: first closed loop on window-0 (its most calls/s), then
#       half of that (--rate) on each board alternately, ROUNDS times; the
#       medians of the Redis CPU per update (the redis-server process,
#       /proc: rank-bench --cpu), of the Redis command time per update
#       (INFO commandstats: usec of every command, added up), and their
#       ratios window/plain.
#   read: the same for GetRank (rank) and GetTopN(10) (top), the window
#       read with window=true (rank-bench --window), the plain board its
#       current period.
#   roll: SLOWLOG of every command (threshold 0), the clock one day on,
#       then one call (rankctl count window-0 --window) starts the roll;
#       polled (HMGET rk:{window-0}:w n s, every 20 ms) until no "n" and
#       "s" starts with the new day's label: the roll's wall time, its
#       calls (FCALL <library>_roll in SLOWLOG), its longest command (and
#       whether that was the swap, the last call), the commands over 10 ms,
#       Redis CPU (process, and commandstats usec).
#   shards: the same roll of shard4-0 (its 4 shards, each with its own
#       state key, rolling side by side), after window-0's.
#
# Needs ~2 GiB of Redis at MEMBERS=1000000, ~5 minutes of preload and
# ~6 minutes of runs on 2 cores.
#
# Usage: bash bench/window.sh               (after building build/)
# Environment: BUILD (default build/), MEMBERS (1000000), ROUNDS (3),
# DURATION (s per rank-bench run, 10), WARMUP (2), CONNECTIONS (16),
# STEPS (any of "update read roll shards", default all),
# OUT (default bench/results/window-<time>).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup window
members=${MEMBERS:-1000000}
conns=${CONNECTIONS:-16}
duration=${DURATION:-10}
steps=" ${STEPS:-update read roll shards} "
rankctl=$build/rankctl
for x in "$rankctl" "$rankd" "$bench"; do
  [ -x "$x" ] || { echo "no $x: build first" >&2; exit 1; }
done
for s in $steps; do
  case $s in
    update | read | roll | shards) ;;
    *) echo "STEPS: unknown step '$s'" >&2; exit 2 ;;
  esac
done
has() { case "$steps" in *" $1 "*) return 0 ;; esac; return 1; }
summary=$out/summary.txt
say() { tee -a "$summary"; }

bench_meta "MEMBERS=$members ROUNDS=$rounds DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns STEPS=\"${steps:1:-1}\" bash bench/window.sh" | say
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" | say
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Times the main thread (its task's id is the pid) was preempted.
switches() { awk '/^nonvoluntary_ctxt_switches/{print $2}' "/proc/$1/task/$1/status"; }
# FCALL's calls and usec in INFO commandstats (the roll's calls; the
# commands they run inside are counted, and logged, on their own too).
fcall_stats() {
  redis-cli -p "$redis_port" INFO commandstats |
    awk -F'[=,]' '/^cmdstat_fcall:/{printf "%d %d\n", $2, $4}'
}

cat >"$work/rankd.conf" <<'CONF'
[defaults]
period=daily
retention=6
mode=increment

[board window-0]
window=7

[board shard4-0]
window=7
shards=4
CONF
clock=$work/clock
now_ms=$(($(date +%s) * 1000))
echo "$now_ms" >"$clock"
day=$(date -u -d "@$((now_ms / 1000))" +%F)
next_day=$(date -u -d "@$((now_ms / 1000 + 86400))" +%F)

free_port redis_port
free_port rankd_port
start_redis "$redis_port" --slowlog-log-slower-than 10000 \
  --slowlog-max-len 1000000
redis_pid=${pids[-1]}
export RANKD_TEST_CLOCK_FILE=$clock
start_rankd "$rankd_port" "$redis_port" --config "$work/rankd.conf"
export RANKCTL_CONNECT=127.0.0.1:$rankd_port
boards=""
{ has update || has read; } && boards="plain"
{ has update || has read || has roll; } && boards="$boards window"
has shards && boards="$boards shard4"
for b in $boards; do
  t0=$(date +%s.%N)
  "$bench" --port "$rankd_port" --members "$members" --board-prefix "$b" \
    --preload-only -c 16 2>/dev/null
  echo "preload $b-0: $members members in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') s" | say
done
for b in $boards; do
  [ "$b" = plain ] && continue
  [ "$("$rankctl" --json count "$b-0" --window)" = "{\"count\":$members}" ] ||
    { echo "$b-0's window does not hold $members members" >&2; exit 1; }
done

# Redis commands over 10 ms since the last call: one line.
slow_note() { # label
  redis-cli -p "$redis_port" --json SLOWLOG GET 1000000 >"$out/slowlog-$1.json"
  python3 - "$1" "$out/slowlog-$1.json" <<'EOF' | say
import json, sys
cmds = [e for e in json.load(open(sys.argv[2], errors="replace"))
        if e[3][0].upper() not in ("CONFIG", "SLOWLOG", "INFO") and e[2] >= 10000]
w = max(cmds, key=lambda e: e[2]) if cmds else None
print("commands over 10 ms during %s: %d%s" % (sys.argv[1], len(cmds),
      ", the longest %d us (%s)" % (w[2], " ".join(a[:40] for a in w[3][:2]))
      if w else ""))
EOF
  redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null
}

# One rank-bench run: its JSON.
run() { # name board-prefix extra-args...
  local name=$1 prefix=$2
  shift 2
  "$bench" --port "$rankd_port" --members "$members" --board-prefix "$prefix" \
    --mode increment --top-n 10 -c "$conns" -d "$duration" -w "$warmup" \
    --json --cpu "redis=$redis_pid,rankd=$rankd_pid" "$@" >"$out/$name.json"
}

# op: update, rank or top; half the window board's closed-loop rate on
# both boards, ROUNDS times.
pair_runs() { # op
  local op=$1 rate
  local win=()
  [ "$op" = update ] || win=(--window)
  echo "== $op: closed loop on window-0"
  run "$op-max" window --mix "$op=1" "${win[@]}"
  rate=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["ops"]
print(max(1, int(sum(o["ops_per_sec"] for o in d.values()) / 2)))' "$out/$op-max.json")
  for r in $(seq 1 "$rounds"); do
    echo "== $op round $r at $rate/s"
    run "$op-r$r-plain" plain --mix "$op=1" --rate "$rate"
    run "$op-r$r-window" window --mix "$op=1" --rate "$rate" "${win[@]}"
  done
}

redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null
ran=""
for op in update rank top; do
  if { [ "$op" = update ] && has update; } || { [ "$op" != update ] && has read; }; then
    pair_runs "$op"
    ran="$ran $op"
  fi
done
if [ -n "$ran" ]; then
  python3 - "$out" "$rounds" $ran <<'EOF' | say
import json, statistics, sys
out, rounds, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
names = {"update": "Update (increment)", "rank": "GetRank", "top": "GetTopN(10)"}
print()
print("| op | board | ops/s | p50 µs | p99 µs | errors | Redis CPU µs/call | rankd CPU µs/call | Redis CPU window/plain |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for op in ops:
    mx = json.load(open("%s/%s-max.json" % (out, op)))
    (_, o), = mx["ops"].items()
    print("| %s | window-0, closed loop (-c %d) | %.0f | %.0f | %.0f | %d | %.1f | %.1f | |" % (
        names[op], mx["connections"], o["ops_per_sec"], o["p50_us"], o["p99_us"],
        o["errors"], mx["cpu_us_per_op"]["redis"], mx["cpu_us_per_op"]["rankd"]))
    med = {}
    for board in ("plain", "window"):
        runs = [json.load(open("%s/%s-r%d-%s.json" % (out, op, r, board)))
                for r in range(1, rounds + 1)]
        m = lambda f: statistics.median(f(d) for d in runs)
        one = lambda d: list(d["ops"].values())[0]
        med[board] = m(lambda d: d["cpu_us_per_op"]["redis"])
        print("| %s | %s-0, half that rate (median of %d) | %.0f | %.0f | %.0f | %d | %.1f | %.1f | %s |" % (
            names[op], board, rounds, m(lambda d: one(d)["ops_per_sec"]),
            m(lambda d: one(d)["p50_us"]), m(lambda d: one(d)["p99_us"]),
            sum(one(d)["errors"] for d in runs), med[board],
            m(lambda d: d["cpu_us_per_op"]["rankd"]),
            "**%.2f**" % (med["window"] / med["plain"])
            if board == "window" else ""))
EOF
  slow_note "updates and reads"
fi

# The roll of board's window (every shard's state key) to the next day.
roll() { # board
  local board=$1 keys t0 t1 c0 c1 u0 u1 polls=0 k st
  mapfile -t keys < <(redis-cli -p "$redis_port" --scan --pattern "rk:*{$board[}/]*:w" | sort)
  [ "${#keys[@]}" -gt 0 ] || { echo "no window state of $board" >&2; exit 1; }
  for k in "${keys[@]}"; do
    echo "$board before: $k $(redis-cli -p "$redis_port" HMGET "$k" s n | paste -sd' ')"
  done
  # 1 ms, not 0: Redis 7 logs the commands a script runs too, which at 0
  # would fill SLOWLOG with the roll's ~10 commands a member (and cost
  # Redis more than the roll itself).
  redis-cli -p "$redis_port" CONFIG SET slowlog-log-slower-than 1000 >/dev/null
  redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null
  c0=$(cpu "$redis_pid")
  x0=$(switches "$redis_pid")
  u0=$(fcall_stats)
  t0=$(date +%s.%N)
  "$rankctl" count "$board" --window >"$work/count.out"
  while :; do
    polls=$((polls + 1))
    st=0
    for k in "${keys[@]}"; do
      # One line each: s, then n (empty when none).
      mapfile -t f < <(redis-cli -p "$redis_port" HMGET "$k" s n)
      if [ -n "${f[1]}" ] || [ "${f[0]#"$next_day"}" = "${f[0]}" ]; then st=1; fi
    done
    [ "$st" = 0 ] && break
    [ "$polls" -lt 30000 ] || { echo "the roll of $board did not end" >&2; exit 1; }
    sleep 0.02 # polling the roll's end, with a bound
  done
  t1=$(date +%s.%N)
  c1=$(cpu "$redis_pid")
  x1=$(switches "$redis_pid")
  u1=$(fcall_stats)
  redis-cli -p "$redis_port" CONFIG SET slowlog-log-slower-than 10000 >/dev/null
  redis-cli -p "$redis_port" --json SLOWLOG GET 1000000 >"$out/slowlog-roll-$board.json"
  redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null
  for k in "${keys[@]}"; do
    echo "$board after: $k $(redis-cli -p "$redis_port" HMGET "$k" s n | paste -sd' ')"
  done
  echo "$board window after the roll: $("$rankctl" --json count "$board" --window); load average $(cut -d' ' -f1-3 /proc/loadavg)" | say
  python3 - "$board" "$t0" "$t1" "$c0" "$c1" "$u0" "$u1" "$ticks" \
    "$out/slowlog-roll-$board.json" "${#keys[@]}" "$((x1 - x0))" <<'EOF' | say
import json, sys
board, t0, t1, c0, c1, u0, u1, hz, f, nkeys, switches = sys.argv[1:]
secs = float(t1) - float(t0)
calls = int(u1.split()[0]) - int(u0.split()[0])
usec = int(u1.split()[1]) - int(u0.split()[1])
cpu_ms = (int(c1) - int(c0)) / int(hz) * 1e3
log = json.load(open(f, errors="replace"))
cmds = [e for e in log if e[3][0].upper() not in ("CONFIG", "SLOWLOG", "INFO")]
rolls = sorted(e[2] for e in cmds if e[3][0].upper() == "FCALL"
               and e[3][1].endswith("_roll"))
inner = [e for e in cmds if e[3][0].upper() != "FCALL"]
swap = [e for e in inner if e[3][0].upper() in ("RENAME", "UNLINK")]
w = max(cmds, key=lambda e: e[2]) if cmds else None
q = lambda p: rolls[min(len(rolls) - 1, int(len(rolls) * p))] if rolls else 0
print()
print("roll of %s (%s state key(s)) to the next day:" % (board, nkeys))
print("- wall time %.2f s (from the call that starts it to the poll that saw it done)" % secs)
print("- roll calls (FCALL <library>_roll, INFO commandstats): %d, %.0f µs each on average, %.1f s in all" % (
    calls, usec / max(calls, 1), usec / 1e6))
print("- Redis CPU over the roll (redis-server, /proc, with the polls): %.1f s, %.0f µs a roll call" % (
    cpu_ms / 1e3, cpu_ms * 1e3 / max(calls, 1)))
print("- SLOWLOG over 1 ms: %d roll calls (p50 %d µs, p99 %d µs, max %d µs), %d commands run inside them (RENAME or UNLINK: %d)" % (
    len(rolls), q(0.5), q(0.99), q(1.0), len(inner), len(swap)))
print("- longest command: %s" % ("%d µs (%s)" % (w[2], " ".join(
    a[:40] for a in w[3][:3])) if w else "none over 1 ms"))
print("- commands over 10 ms: %d; Redis's main thread was preempted %s times meanwhile (nonvoluntary_ctxt_switches)" % (
    sum(1 for e in cmds if e[2] >= 10000), switches))
EOF
}

if has roll || has shards; then
  echo "$((now_ms + 86400000))" >"$clock"
  echo "clock moved from $day to $next_day" | say
  has roll && roll window-0
  has shards && roll shard4-0
fi
echo "results in $out"
