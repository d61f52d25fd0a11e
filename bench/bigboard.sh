#!/bin/bash
# bigboard.sh -- a board of MEMBERS (50 million) members, by hand: import,
# memory, reads and updates against a SMALL board, export, a plain ZADD
# sorted set beside it, a sharded board, and the reset/delete of both.
#
# Not for CI: at 50M it needs ~15 GiB of Redis at its peak (the board and a
# plain sorted set of the same members), a streaming rankctl import and
# export (ones that hold every entry need ~350 and ~200 MiB per 1M entries),
# ~5 GB of disk, and about 1.5 h (the sharded import alone ran ~20k
# entries/s at 1M).
#
# Usage: MEMBERS=50000000 bash bench/bigboard.sh     (after building build/)
#        STEPS="read" MEMBERS=1000000 bash bench/bigboard.sh
# Environment: MEMBERS (default 50000000), SMALL (default 1000000),
# SHARD_MEMBERS (the sharded board's, default MEMBERS), BUILD
# (default build/), OUT (default bench/results/bigboard-<time>), GEN_DIR
# (where generated files are kept for reruns, default
# bench/results/bigboard-gen), DURATION (s per rank-bench run, default 10),
# WARMUP (2), CONNECTIONS (rank-bench's, 16), STEPS (any of
# "import read export zadd shards delete", default all; the boards a step
# needs are imported whatever STEPS says, but only reported under import).
#
# Steps, in this order (memory stays below ~20 GiB at 50M):
#   (always) bigboard-gen writes MEMBERS and SMALL entries in export's own
#       form (m0.., sorted by member bytewise, data on every tenth) into
#       GEN_DIR, once. Boards "big-0" and "small-0": rank-bench's names, so
#       --members/--board-prefix hit members that exist, without --preload.
#   import: rankctl import of both into one Redis + rankd: entries/s, CPU
#       us/entry, rankctl's peak RSS (getrusage), rankd's and redis-server's
#       peak RSS (VmHWM: the process's peak since it started); Redis bytes
#       per member (used_memory delta of the big import) and per key
#       (MEMORY USAGE key SAMPLES 0: sorted set, times hash, data hash,
#       request-id record hashes).
#   export: rankctl export of the big board: entries/s, peak RSS, and cmp
#       with the generated file (byte-identical round trip). Runs before
#       read, whose updates change the board.
#   read: per op (update, rank, top10, top100, around, percentile): the
#       maximum rate on the big board (closed loop), then half of it
#       (--rate) on the big and on the small board, with the CPU per call
#       of redis, rankd and rank-bench; the ratio redis us big/small.
#   zadd: the same members and scores as a plain ZADD sorted set (64 a
#       command, redis-cli --pipe) in a fresh Redis: bytes per member, and
#       rankd's against it. That Redis is stopped afterwards.
#   delete (single): board-info's time on the big board, then reset-board
#       with every Redis command in SLOWLOG (threshold 0): the longest, and
#       how long until used_memory is back within 5% of its value before
#       the big import (INFO memory every 100 ms, lazyfree_pending_objects).
#       The single-node Redis is stopped afterwards.
#   shards: SHARD_MEMBERS as board "shard-0" (shards=10) over 3 Redis
#       processes: import entries/s, then GetRank and GetTopN(10) with the
#       CPU per call of each process.
#   delete (sharded): delete-board of shard-0, as the reset above, per
#       Redis.
# Every step also reports the Redis commands over 10 ms in SLOWLOG.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup bigboard
members=${MEMBERS:-50000000}
small=${SMALL:-1000000}
shard_members=${SHARD_MEMBERS:-$members}
duration=${DURATION:-10}
conns=${CONNECTIONS:-16}
steps=" ${STEPS:-import read export zadd shards delete} "
gen_dir=${GEN_DIR:-$here/results/bigboard-gen}
rankctl=$build/rankctl
gen=$build/bench/bigboard-gen
for x in "$rankctl" "$rankd" "$bench" "$gen"; do
  [ -x "$x" ] || { echo "no $x: build first" >&2; exit 1; }
done
for s in $steps; do
  case $s in
    import | read | export | zadd | shards | delete) ;;
    *) echo "STEPS: unknown step '$s'" >&2; exit 2 ;;
  esac
done
has() { case "$steps" in *" $1 "*) return 0 ;; esac; return 1; }
summary=$out/summary.txt
say() { tee -a "$summary"; }

bench_meta "MEMBERS=$members SMALL=$small SHARD_MEMBERS=$shard_members DURATION=$duration WARMUP=$warmup CONNECTIONS=$conns STEPS=\"${steps:1:-1}\" bash bench/bigboard.sh" | say
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/{printf "%.0f", $2/1024}' "/proc/$1/status"; } # MiB
used() { redis-cli -p "$1" INFO memory | awk -F: '/^used_memory:/{printf "%.0f\n", $2}'; }
mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1048576}'; }

# ---- the entries, generated once ----
mkdir -p "$gen_dir"
big_csv=$gen_dir/bigboard-$members.csv
small_csv=$gen_dir/bigboard-$small.csv
shard_csv=$gen_dir/bigboard-$shard_members.csv
for n in "$members" "$small" "$shard_members"; do
  f=$gen_dir/bigboard-$n.csv
  if [ ! -s "$f" ]; then
    t0=$(date +%s.%N)
    "$gen" "$n" csv >"$f.part"
    mv "$f.part" "$f"
    echo "generated $n entries ($(mib "$(stat -c %s "$f")") MiB) in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s" | say
  fi
done

# Redis commands over 10 ms since the last call, per Redis: one line.
slow_note() { # label port...
  local label=$1
  shift
  for p in "$@"; do
    redis-cli -p "$p" --json SLOWLOG GET 1000000 >"$out/slowlog-$label-$p.json"
    python3 -c '
import json, sys
label, port, f = sys.argv[1:]
cmds = [e for e in json.load(open(f, errors="replace"))
        if e[3][0].upper() not in ("CONFIG", "SLOWLOG", "INFO") and e[2] >= 10000]
if cmds:
    w = max(cmds, key=lambda e: e[2])
    print("slowlog over 10 ms during %s (redis :%s): %d commands, the longest "
          "%d us (%s)" % (label, port, len(cmds), w[2],
                        " ".join(a[:40] for a in w[3][:4])))' \
      "$label" "$p" "$out/slowlog-$label-$p.json" | say
    redis-cli -p "$p" SLOWLOG RESET >/dev/null
  done
}

# A Redis for this run, commands over 10 ms logged; pid in redis_pid.
redis_up() { # port
  start_redis "$1" --slowlog-log-slower-than 10000 --slowlog-max-len 1000000
  redis_pid=${pids[-1]}
}

# Stops one process this script started.
stop_pid() { # pid
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local kept=()
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  pids=("${kept[@]}")
}

# Runs a rankctl command timed: one table row of entries/s, the CPU
# us/entry of the Redis processes (all together), rankd and rankctl, and
# rankctl's peak RSS (getrusage of the child: ru_maxrss).
step_row() { # label entries redis-pids rankd-pid command...
  local label=$1 entries=$2 rpids=$3 kpid=$4
  shift 4
  local r0=0 r1=0 k0 k1 t0 t1 p
  for p in $rpids; do r0=$((r0 + $(cpu "$p"))); done
  k0=$(cpu "$kpid")
  t0=$(date +%s.%N)
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%f %f %d" % (r.ru_utime, r.ru_stime, r.ru_maxrss))' \
    "$work/time" "$@" 2>"$work/step.err" || { cat "$work/step.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  for p in $rpids; do r1=$((r1 + $(cpu "$p"))); done
  k1=$(cpu "$kpid")
  python3 - "$label" "$entries" "$t0" "$t1" "$r0" "$r1" "$k0" "$k1" "$(cat "$work/time")" "$ticks" <<'EOF'
import sys
label, n, t0, t1, r0, r1, k0, k1, own, hz = sys.argv[1:]
n, secs, hz = int(n), float(t1) - float(t0), int(hz)
us = lambda ticks: ticks / hz * 1e6 / n
u, s, rss = own.split()
print("| %s | %d | %.1f | %s | %.2f | %.2f | %.2f | %.0f |" % (
    label, n, secs, format(round(n / secs), ","), us(int(r1) - int(r0)),
    us(int(k1) - int(k0)), (float(u) + float(s)) * 1e6 / n, int(rss) / 1024))
EOF
}
step_head() {
  echo
  echo "| $1 | entries | s | entries/s | Redis µs/entry | rankd µs/entry | rankctl µs/entry | rankctl peak RSS MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
}

# Polls INFO memory of the ports every 100 ms from now until stop_file
# exists and each has freed 95% of what it held over its base when the poll
# began, with no lazyfree_pending_objects (or 600 s after stop_file);
# writes "unix-time port used_memory lazyfree_pending_objects" lines.
poll_memory() { # out stop-file port:base...
  python3 - "$@" <<'EOF' &
import os, socket, sys, time
out, stop = sys.argv[1], sys.argv[2]
nodes = [(int(p), int(b)) for p, b in (a.split(":") for a in sys.argv[3:])]
socks = {p: socket.create_connection(("127.0.0.1", p)) for p, _ in nodes}
def recv(s):
    # A Redis gone (the run stopped): so is this poll, rather than spin.
    data = s.recv(65536)
    if not data:
        sys.exit(0)
    return data
def info(p):
    s = socks[p]
    s.sendall(b"INFO memory\r\n")
    buf = b""
    while b"\r\n" not in buf:
        buf += recv(s)
    head, rest = buf.split(b"\r\n", 1)
    n = int(head[1:])
    while len(rest) < n + 2:
        rest += recv(s)
    f = dict(l.split(":", 1) for l in rest[:n].decode().splitlines() if ":" in l)
    return int(f["used_memory"]), int(f.get("lazyfree_pending_objects", 0))
first, stopped = {}, None
with open(out, "w") as f:
    while True:
        now = time.time()
        done = True
        for p, base in nodes:
            u, lz = info(p)
            f.write("%.3f %d %d %d\n" % (now, p, u, lz))
            first.setdefault(p, u)
            done = done and u <= base + 0.05 * (first[p] - base) and lz == 0
        f.flush()
        if stopped is None and os.path.exists(stop):
            stopped = now
        if stopped is not None and (done or now - stopped > 600):
            break
        time.sleep(0.1)
EOF
  poll_pid=$!
}

# A reset-board or delete-board with every Redis command in SLOWLOG, and the
# memory coming back: one table row per Redis.
delete_rows() { # label port:base... -- command...
  local label=$1 nodes=() p t0 t1
  shift
  while [ "$1" != -- ]; do nodes+=("$1"); shift; done
  shift
  for p in "${nodes[@]}"; do
    redis-cli -p "${p%%:*}" CONFIG SET slowlog-log-slower-than 0 >/dev/null
    redis-cli -p "${p%%:*}" SLOWLOG RESET >/dev/null
  done
  rm -f "$work/stop"
  poll_memory "$work/poll" "$work/stop" "${nodes[@]}"
  sleep 0.3
  t0=$(date +%s.%N)
  "$@" >"$work/delete.out"
  t1=$(date +%s.%N)
  touch "$work/stop"
  wait "$poll_pid"
  for p in "${nodes[@]}"; do
    redis-cli -p "${p%%:*}" CONFIG SET slowlog-log-slower-than 10000 >/dev/null
    redis-cli -p "${p%%:*}" --json SLOWLOG GET 10000000 >"$work/slow-${p%%:*}.json"
    redis-cli -p "${p%%:*}" SLOWLOG RESET >/dev/null
  done
  python3 - "$label" "$t0" "$t1" "$work" "${nodes[@]}" <<'EOF'
import json, sys
label, t0, t1, work = sys.argv[1:5]
secs = float(t1) - float(t0)
rows = [l.split() for l in open(work + "/poll")]
start = None
for p, base in (a.split(":") for a in sys.argv[5:]):
    base = int(base)
    cmds = [e for e in json.load(open("%s/slow-%s.json" % (work, p), errors="replace"))
            if e[3][0].upper() not in ("CONFIG", "SLOWLOG", "INFO")]
    worst = max(cmds, key=lambda e: e[2]) if cmds else [0, 0, 0, ["-"]]
    mine = [(float(r[0]), int(r[2]), int(r[3])) for r in rows if r[1] == p]
    held = mine[0][1]  # 0.3 s before the command
    # Seconds from the command's start.
    back = next((t for t, u, lz in mine
                 if u <= base + 0.05 * (held - base) and lz == 0), None)
    lazy = next((t for t, u, lz in mine if t > float(t1) and lz == 0), None)
    s = lambda t: "%.1f" % max(0.0, t - float(t0)) if t is not None else "not reached"
    print("| %s | :%s | %.2f | %d | %d | %s | %.1f | %.1f | %.1f | %s | %d | %s |" % (
        label, p, secs, len(cmds), worst[2], worst[3][0], base / 1048576,
        held / 1048576, mine[-1][1] / 1048576, s(back),
        max(lz for _, _, lz in mine), s(lazy)))
EOF
}
delete_head() {
  echo
  echo "| $1 | Redis | command s | Redis commands | longest µs | its command | used_memory MiB: before the import | before the command | at the end | s until 95% of the difference is freed | max lazyfree_pending_objects | s until none pending |"
  echo "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
}

# ---- one Redis and rankd: import, export, read, zadd, reset ----
if has import || has read || has export || has zadd || has delete; then
  free_port redis_port
  free_port rankd_port
  redis_up "$redis_port"
  r1_pid=$redis_pid
  # Export, board-info and reset-board need the admin role, granted on
  # purpose.
  start_rankd "$rankd_port" "$redis_port" --grant anonymous=read,write,admin
  export RANKCTL_CONNECT=127.0.0.1:$rankd_port
  ctl=("$rankctl" --timeout 3600)
  u_empty=$(used "$redis_port")
  step_head "import (one Redis)" >"$work/import.md"
  step_row "small-0 ($small)" "$small" "$r1_pid" "$rankd_pid" \
    "${ctl[@]}" import small-0 "$small_csv" >>"$work/import.md"
  u_before=$(used "$redis_port")
  step_row "big-0 ($members)" "$members" "$r1_pid" "$rankd_pid" \
    "${ctl[@]}" import big-0 "$big_csv" >>"$work/import.md"
  u_after=$(used "$redis_port")
  [ "$("${ctl[@]}" --json count big-0)" = "{\"count\":$members}" ] ||
    { echo "big-0 does not hold $members members" >&2; exit 1; }
  rankd_per_member=$(((u_after - u_before) / members))
  if has import; then
    say <"$work/import.md"
    echo "peak RSS (VmHWM, each process's peak since it started) after the imports: rankd $(hwm "$rankd_pid") MiB, redis-server $(hwm "$r1_pid") MiB" | say
    echo "Redis used_memory: empty $(mib "$u_empty") MiB, before the big import $(mib "$u_before") MiB, after $(mib "$u_after") MiB: $rankd_per_member bytes per member" | say
    slow_note import "$redis_port"
    # The board's keys, each measured in full (SAMPLES 0: a walk over every
    # element, seconds at 50M, and itself logged over 10 ms).
    redis-cli -p "$redis_port" --scan --pattern 'rk:{big-0}*' | sort >"$work/keys"
    {
      echo
      echo "| key of big-0 | type | elements | bytes (MEMORY USAGE SAMPLES 0) | bytes per member |"
      echo "|---|---|---:|---:|---:|"
      qn=0 qb=0 qe=0
      while read -r key; do
        type=$(redis-cli -p "$redis_port" TYPE "$key")
        bytes=$(redis-cli -p "$redis_port" MEMORY USAGE "$key" SAMPLES 0)
        case $type in
          zset) n=$(redis-cli -p "$redis_port" ZCARD "$key") ;;
          hash) n=$(redis-cli -p "$redis_port" HLEN "$key") ;;
          *) n=1 ;;
        esac
        case $key in
          "rk:{big-0}:q"?*) qn=$((qn + 1)) qb=$((qb + bytes)) qe=$((qe + n)) ;;
          *) echo "| $key | $type | $n | $bytes | $(awk -v b="$bytes" -v m="$members" 'BEGIN{printf "%.1f", b/m}') |" ;;
        esac
      done <"$work/keys"
      echo "| rk:{big-0}:q* (request-id records: $qn keys) | hash | $qe | $qb | $(awk -v b="$qb" -v m="$members" 'BEGIN{printf "%.2f", b/m}') |"
    } | say
  fi
  redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null

  if has export; then
    {
      step_head "export"
      step_row "big-0" "$members" "$r1_pid" "$rankd_pid" \
        "${ctl[@]}" export big-0 --output "$work/export.csv"
    } | say
    if cmp "$big_csv" "$work/export.csv"; then
      echo "round trip: the export is the generated file, byte for byte ($(stat -c %s "$big_csv") bytes)" | say
    else
      echo "round trip: the export DIFFERS from the generated file" | say
    fi
    rm -f "$work/export.csv"
    slow_note export "$redis_port"
  fi

  if has read; then
    echo "== read: $((6 * 3)) rank-bench runs of ${duration}+${warmup} s"
    for spec in update:update=1:10 rank:rank=1:10 top10:top=1:10 \
      top100:top=1:100 around:around=1:10 percentile:percentile=1:10; do
      IFS=: read -r name mix n <<<"$spec"
      common=(--port "$rankd_port" --mix "$mix" --top-n "$n" -c "$conns"
        -d "$duration" -w "$warmup" --json)
      "$bench" "${common[@]}" --members "$members" --board-prefix big \
        --cpu "redis=$r1_pid,rankd=$rankd_pid" >"$out/read-$name-max.json"
      rate=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["ops"]
print(max(1, int(sum(o["ops_per_sec"] for o in d.values()) / 2)))' "$out/read-$name-max.json")
      "$bench" "${common[@]}" --members "$members" --board-prefix big \
        --rate "$rate" --cpu "redis=$r1_pid,rankd=$rankd_pid" \
        >"$out/read-$name-big.json"
      "$bench" "${common[@]}" --members "$small" --board-prefix small \
        --rate "$rate" --cpu "redis=$r1_pid,rankd=$rankd_pid" \
        >"$out/read-$name-small.json"
    done
    python3 - "$out" "$members" "$small" "$conns" <<'EOF' | say
import json, sys
out, big, small, conns = sys.argv[1:]
print()
print("| op | board | rate | ops/s | p50 µs | p99 µs | errors | redis µs/call | rankd µs/call | client µs/call | redis µs big/small |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in ["update", "rank", "top10", "top100", "around", "percentile"]:
    rows = {}
    for run in ["max", "big", "small"]:
        d = json.load(open("%s/read-%s-%s.json" % (out, name, run)))
        (op, o), = d["ops"].items()
        rows[run] = (o, d.get("cpu_us_per_op", {}))
    ratio = rows["big"][1].get("redis", 0) / max(rows["small"][1].get("redis", 0), 1e-9)
    for run, board, rate in [("max", "big-0 (%s)" % big, "max, -c %s" % conns),
                             ("big", "big-0 (%s)" % big, "half of max"),
                             ("small", "small-0 (%s)" % small, "half of max")]:
        o, c = rows[run]
        f = lambda k: "%.1f" % c[k] if k in c else "-"
        print("| %s | %s | %s | %.0f | %.0f | %.0f | %d | %s | %s | %s | %s |" % (
            name, board, rate, o["ops_per_sec"], o["p50_us"], o["p99_us"],
            o["errors"], f("redis"), f("rankd"), f("client"),
            "%.2f" % ratio if run == "small" else ""))
EOF
    slow_note read "$redis_port"
  fi

  if has zadd; then
    free_port plain_port
    redis_up "$plain_port"
    plain_pid=$redis_pid
    p0=$(used "$plain_port")
    t0=$(date +%s.%N)
    "$gen" "$members" zadd plain:z | redis-cli -p "$plain_port" --pipe >"$work/plain.out"
    t1=$(date +%s.%N)
    grep -q 'errors: 0' "$work/plain.out" || { cat "$work/plain.out" >&2; exit 1; }
    [ "$(redis-cli -p "$plain_port" ZCARD plain:z)" = "$members" ]
    p1=$(used "$plain_port")
    plain_z=$(redis-cli -p "$plain_port" MEMORY USAGE plain:z SAMPLES 0)
    big_z=$(redis-cli -p "$redis_port" MEMORY USAGE 'rk:{big-0}:z' SAMPLES 0)
    redis-cli -p "$redis_port" SLOWLOG RESET >/dev/null # that MEMORY USAGE
    python3 - "$members" "$t0" "$t1" "$p0" "$p1" "$plain_z" "$big_z" "$rankd_per_member" <<'EOF' | say
import sys
n, t0, t1, p0, p1, pz, bz, rk = sys.argv[1:]
n = int(n)
plain = (int(p1) - int(p0)) / n
print()
print("| board | bytes per member (used_memory delta) | sorted set alone, bytes per member (MEMORY USAGE) |")
print("|---|---:|---:|")
print("| rankd big-0 | %d | %.1f |" % (int(rk), int(bz) / n))
print("| plain ZADD (redis-cli --pipe, 64 a command, %s members/s) | %.1f | %.1f |" % (
    format(round(n / (float(t1) - float(t0))), ","), plain, int(pz) / n))
print("| ratio rankd/plain | %.2f | %.2f |" % (int(rk) / plain, int(bz) / int(pz)))
EOF
    stop_pid "$plain_pid"
  fi

  if has delete; then
    t0=$(date +%s.%N)
    "${ctl[@]}" board-info big-0 >"$out/board-info.txt"
    t1=$(date +%s.%N)
    echo "board-info big-0 ($members members): $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}') s" | say
    slow_note board-info "$redis_port"
    {
      delete_head "reset-board"
      delete_rows "big-0" "$redis_port:$u_before" -- "${ctl[@]}" reset-board big-0 --yes
    } | say
    cp "$work/poll" "$out/reset-poll.txt"
  fi
  stop_all
fi

# ---- the sharded board over 3 Redis ----
if has shards || has delete; then
  cat >"$work/rankd.conf" <<'CONF'
[board shard-0]
shards=10
CONF
  redis_args=() cpus=() rpids="" nodes=() ports=()
  for i in 1 2 3; do
    free_port port
    redis_up "$port"
    redis_args+=(--redis "127.0.0.1:$port")
    cpus+=("redis$i=$redis_pid")
    rpids="$rpids $redis_pid"
    ports+=("$port")
  done
  free_port rankd_port
  start_rankd "$rankd_port" "${ports[0]}" --config "$work/rankd.conf" \
    "${redis_args[@]:2}" --grant anonymous=read,write,admin
  cpus+=("rankd=$rankd_pid")
  export RANKCTL_CONNECT=127.0.0.1:$rankd_port
  ctl=("$rankctl" --timeout 3600)
  for p in "${ports[@]}"; do nodes+=("$p:$(used "$p")"); done
  step_head "import (shards=10 over 3 Redis)" >"$work/shards.md"
  step_row "shard-0 ($shard_members)" "$shard_members" "$rpids" "$rankd_pid" \
    "${ctl[@]}" import shard-0 "$shard_csv" >>"$work/shards.md"
  [ "$("${ctl[@]}" --json count shard-0)" = "{\"count\":$shard_members}" ] ||
    { echo "shard-0 does not hold $shard_members members" >&2; exit 1; }
  if ! has shards; then
    for p in "${ports[@]}"; do redis-cli -p "$p" SLOWLOG RESET >/dev/null; done
  else
    say <"$work/shards.md"
    for p in "${ports[@]}"; do
      echo "redis :$p used_memory $(mib "$(used "$p")") MiB"
    done | paste -sd';' | say
    for spec in rank:rank=1:10 top10:top=1:10; do
      IFS=: read -r name mix n <<<"$spec"
      "$bench" --port "$rankd_port" --mix "$mix" --top-n "$n" -c "$conns" \
        -d "$duration" -w "$warmup" --json --members "$shard_members" \
        --board-prefix shard --cpu "$(IFS=,; echo "${cpus[*]}")" \
        >"$out/shards-$name.json"
    done
    python3 - "$out" <<'EOF' | say
import json, sys
print()
print("| op (shard-0, closed loop) | ops/s | p50 µs | p99 µs | errors | redis1 µs/call | redis2 | redis3 | rankd | client |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in ["rank", "top10"]:
    d = json.load(open("%s/shards-%s.json" % (sys.argv[1], name)))
    (op, o), = d["ops"].items()
    c = d.get("cpu_us_per_op", {})
    print("| %s | %.0f | %.0f | %.0f | %d | %s |" % (
        name, o["ops_per_sec"], o["p50_us"], o["p99_us"], o["errors"],
        " | ".join("%.1f" % c.get(k, 0) for k in
                   ["redis1", "redis2", "redis3", "rankd", "client"])))
EOF
    slow_note shards "${ports[@]}"
  fi
  if has delete; then
    {
      delete_head "delete-board (shards=10)"
      delete_rows "shard-0" "${nodes[@]}" -- "${ctl[@]}" delete-board shard-0 --yes
    } | say
    cp "$work/poll" "$out/delete-poll.txt"
  fi
  stop_all
fi
echo "results in $out"
