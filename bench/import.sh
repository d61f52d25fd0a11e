#!/bin/bash
# import.sh -- rankctl import and export of a large board, and its delete.
#
# Generates a file of MEMBERS entries (with times, and data on every tenth)
# in export's own form, imports it into an empty board, then imports the
# same file again (every entry already applied: the re-run after an
# interruption); exports the board (the file must come back byte for byte),
# imports the export into a second empty board and exports that (the same
# bytes again). Reports entries/s and the CPU us per entry of redis-server,
# rankd and rankctl over each step (from /proc and getrusage, user +
# system). Then deletes the first board with every Redis command logged
# (SLOWLOG, threshold 0) and reports the longest.
#
# Usage: bash bench/import.sh
# Environment: MEMBERS (default 1000000), FORMAT (csv or jsonl, default
# csv), BUILD (default build/), OUT (default bench/results/import-<time>).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup import
format=${FORMAT:-csv}
rankctl=$build/rankctl
[ -x "$rankctl" ] || { echo "no $rankctl: build first" >&2; exit 1; }

bench_meta "MEMBERS=$members FORMAT=$format bash bench/import.sh" | tee "$out/summary.txt"

redis_port=$(free_port)
rankd_port=$(free_port)
start_redis "$redis_port"
redis_pid=${pids[-1]}
"$rankd" --listen "127.0.0.1:$rankd_port" --redis "127.0.0.1:$redis_port" \
  >"$work/rankd.log" 2>&1 &
rankd_pid=$!
pids+=("$rankd_pid")
wait_port "$rankd_port" "$rankd_pid" || { echo "rankd did not start" >&2; exit 1; }
export RANKCTL_CONNECT=127.0.0.1:$rankd_port

# The entries, in export's own form: sorted by member id bytewise.
python3 "$here/import_gen.py" "$members" "$format" >"$work/gen.$format"

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Runs a rankctl command, timed, with the CPU of Redis, rankd and rankctl
# per entry; prints one table row.
step() { # label entries command...
  local label=$1 entries=$2
  shift 2
  local r0 k0 t0 t1 r1 k1 own
  r0=$(cpu "$redis_pid")
  k0=$(cpu "$rankd_pid")
  t0=$(date +%s.%N)
  # The command's own CPU (and its children's), from getrusage.
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%f %f" % (r.ru_utime, r.ru_stime))' \
    "$work/time" "$@" 2>"$work/step.err" || { cat "$work/step.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  own=$(cat "$work/time")
  r1=$(cpu "$redis_pid")
  k1=$(cpu "$rankd_pid")
  python3 - "$label" "$entries" "$t0" "$t1" "$r0" "$r1" "$k0" "$k1" "$own" "$ticks" <<'EOF'
import sys
label, n, t0, t1, r0, r1, k0, k1, own, hz = sys.argv[1:]
n, secs, hz = int(n), float(t1) - float(t0), int(hz)
us = lambda ticks: ticks / hz * 1e6 / n
client = sum(float(x) for x in own.split()) * 1e6 / n
print("| %s | %d | %.1f | %s | %.2f | %.2f | %.2f |" % (
    label, n, secs, format(round(n / secs), ","),
    us(int(r1) - int(r0)), us(int(k1) - int(k0)), client))
EOF
}

{
  echo
  echo "| step | entries | s | entries/s | Redis µs/entry | rankd µs/entry | rankctl µs/entry |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  step "import into an empty board" "$members" "$rankctl" import bench_a "$work/gen.$format"
  step "the same import again (all applied before)" "$members" "$rankctl" import bench_a "$work/gen.$format"
  step "export" "$members" "$rankctl" export bench_a --output "$work/a.$format"
  step "import of the export into an empty board" "$members" "$rankctl" import bench_b "$work/a.$format"
  step "export of that board" "$members" "$rankctl" export bench_b --output "$work/b.$format"
} | tee -a "$out/summary.txt"
count=$("$rankctl" --json count bench_a)
echo "count: $count" | tee -a "$out/summary.txt"
[ "$count" = "{\"count\":$members}" ]
cmp "$work/gen.$format" "$work/a.$format"
cmp "$work/a.$format" "$work/b.$format"
echo "round trip: the generated file, its export and the export of its import are the same $(wc -c <"$work/a.$format") bytes" | tee -a "$out/summary.txt"

# The delete, with every Redis command in the slow log.
rcli() { redis-cli -p "$redis_port" "$@"; }
rcli CONFIG SET slowlog-max-len 1000000 >/dev/null
rcli CONFIG SET slowlog-log-slower-than 0 >/dev/null
rcli SLOWLOG RESET >/dev/null
t0=$(date +%s.%N)
"$rankctl" --json delete-board bench_a --yes --request-id bench-delete >"$work/delete.json"
t1=$(date +%s.%N)
rcli CONFIG SET slowlog-log-slower-than 10000 >/dev/null
python3 - "$work/delete.json" "$t0" "$t1" "$redis_port" <<'EOF' | tee -a "$out/summary.txt"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
secs = float(sys.argv[3]) - float(sys.argv[2])
log = subprocess.run(["redis-cli", "-p", sys.argv[4], "--json", "SLOWLOG",
                      "GET", "1000000"], capture_output=True, text=True,
                     check=True).stdout
# Each entry: [id, time, microseconds, [command, args...], client, name];
# the slow log's own CONFIG SET left out.
cmds = [e for e in json.loads(log) if e[3][0].upper() != "CONFIG"]
worst = max(cmds, key=lambda e: e[2])
names = {}
for e in cmds:
    names[e[3][0].upper()] = names.get(e[3][0].upper(), 0) + 1
print("delete: %d keys in %.2f s; %d Redis commands (%s); the longest %d us "
      "(%s)" % (d["keys_removed"], secs, len(cmds),
                ", ".join("%s %d" % kv for kv in sorted(names.items())),
                worst[2], worst[3][0]))
assert worst[2] < 10000, "a command of the delete took over 10 ms"
EOF
[ "$("$rankctl" --json count bench_a)" = '{"count":0}' ]
