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
# (SLOWLOG, threshold 0) and reports the longest. Last, the floor: the
# same entries as plain ZADD/HSET commands piped into an empty Redis, for
# the Redis CPU an entry costs beyond the layout itself.
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

free_port "redis_port"
free_port "rankd_port"
start_redis "$redis_port"
redis_pid=${pids[-1]}
# Export and delete-board need the admin role, granted on purpose.
start_rankd "$rankd_port" "$redis_port" --grant anonymous=read,write,admin
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

# The storage floor, for a ratio in the same run: the same entries written
# as rankd lays them out (a sorted set of time prefix + member, a hash of
# member -> prefix, the data hash), as plain ZADD/HSET commands of 64
# entries each, piped by redis-cli into an empty Redis: no script, no
# request ids, no checks. What an import costs Redis beyond its layout is
# the difference.
free_port "floor_port"
start_redis "$floor_port"
floor_pid=${pids[-1]}
python3 - "$members" "$work/floor.resp" <<'EOF'
import json, random, struct, sys
# bench/import_gen.py's entries again (seed 7).
n, out = int(sys.argv[1]), sys.argv[2]
random.seed(7)
def resp(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
members = sorted("m%d" % i for i in range(n))
with open(out, "wb") as f:
    for at in range(0, n, 64):
        z, t, a = [b"ZADD", b"rk:{floor}:z"], [b"HSET", b"rk:{floor}:t"], []
        for m in members[at:at + 64]:
            score = random.randint(-10**12, 10**12)
            ms = 1700000000000 + random.randint(0, 10**9)
            prefix = struct.pack(">Q", ms)[2:]
            z += [-score, prefix + m.encode()]
            t += [m, prefix]
            if int(m[1:]) % 10 == 0:
                a += [m, json.dumps({"name": "player " + m})]
        f.write(resp(z) + resp(t))
        if a:
            f.write(resp([b"HSET", b"rk:{floor}:a"] + a))
EOF
f0=$(cpu "$floor_pid")
t0=$(date +%s.%N)
redis-cli -p "$floor_port" --pipe <"$work/floor.resp" >"$work/floor.out"
t1=$(date +%s.%N)
f1=$(cpu "$floor_pid")
grep -q 'errors: 0' "$work/floor.out"
[ "$(redis-cli -p "$floor_port" ZCARD 'rk:{floor}:z')" = "$members" ]
python3 -c 'import sys
n, t0, t1, f0, f1, hz = sys.argv[1:]
n = int(n)
print("floor: the same entries as plain ZADD/HSET, 64 a command, piped by "
      "redis-cli: %s entries/s, Redis %.2f us/entry" % (
          format(round(n / (float(t1) - float(t0))), ","),
          (int(f1) - int(f0)) / int(hz) * 1e6 / n))' \
  "$members" "$t0" "$t1" "$f0" "$f1" "$ticks" | tee -a "$out/summary.txt"
