#!/bin/bash
# layout_memory.sh -- Redis memory per member of a board's layout, part by
# part, against a plain ZADD, and the layouts that could cost less.
#
# 1. rankd: MEMBERS entries of bench/import_gen.py (their data dropped
#    unless DATA=1) loaded by `rankctl import` into an empty board of a
#    fresh Redis: used_memory's growth per member, and MEMORY USAGE
#    (SAMPLES 0) of each of the board's keys.
# 2. In a second fresh Redis, each written plainly (redis-cli --pipe, 64
#    entries a command, the generator's scores and times):
#    plain   ZADD plain -score mN (what a member costs without rankd)
#    zset    rankd's sorted set (member = 6-byte time prefix + mN)
#    t14     rankd's times hash, mN -> prefix + 8-byte score (layout 4)
#    t12     the same with a 6-byte score (a shorter value)
#    t6      the prefix alone (layout 3)
#    tb<n>   the times hash cut into k = ceil(MEMBERS / n) small hashes
#            rk:{b}:t<n>:<j>, j = crc32(mN) mod k: n members a hash on
#            average (listpack while under hash-max-listpack-entries)
#    each: used_memory's growth per member and MEMORY USAGE per member.
# 3. The CPU of a lookup: the same random HGETs (LOOKUPS of them) piped
#    against t14 and against each tb<n>, Redis's CPU (/proc) per HGET.
#
# MEMORY USAGE counts a dictEntry as its 24 bytes, jemalloc gives it 32:
# used_memory is the figure to quote; MEMORY USAGE splits it by key.
#
# Usage: bash bench/layout_memory.sh
# Environment: MEMBERS (default 1000000), BUILD (default build/), DATA (1
# to keep the generator's data on every tenth entry), BUCKET_SIZES
# (default "32 64 128"), LOOKUPS (default 2000000), OUT (default
# bench/results/layout-memory-<time>).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
MEMBERS=${MEMBERS:-1000000}
bench_setup layout-memory
rankctl=$build/rankctl
[ -x "$rankctl" ] || { echo "no $rankctl: build first" >&2; exit 1; }
sizes=${BUCKET_SIZES:-32 64 128}
lookups=${LOOKUPS:-2000000}

bench_meta "MEMBERS=$members DATA=${DATA:-0} bash bench/layout_memory.sh" | tee "$out/summary.txt"

used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r'; }
per() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[1]) / int(sys.argv[2])))' "$@"; }
# A thread's time on a CPU, in ns (schedstat: not the time it waited for
# one, on a shared machine).
cpu_ns() { awk '{print $1}' "/proc/$1/task/$1/schedstat"; }

# 1. rankd's own layout, through rankctl import.
free_port "redis_port"
free_port "rankd_port"
start_redis "$redis_port" --enable-debug-command local
start_rankd "$rankd_port" "$redis_port" --grant anonymous=read,write,admin
python3 "$here/import_gen.py" "$members" csv >"$work/gen.csv"
if [ "${DATA:-0}" != 1 ]; then
  sed -i 's/,,"{.*}"$/,,/' "$work/gen.csv"
fi
m0=$(used "$redis_port")
RANKCTL_CONNECT=127.0.0.1:$rankd_port "$rankctl" import mem "$work/gen.csv" >/dev/null
m1=$(used "$redis_port")
rm -f "$work/gen.csv"
{
  echo
  echo "rankd (rankctl import of $members entries, data=${DATA:-0}): used_memory $(per $((m1 - m0)) "$members") B a member"
  echo "| key | encoding | MEMORY USAGE B a member |"
  echo "|---|---|---:|"
  qsum=0
  qn=0
  # A fresh Redis: the board's keys are all it holds.
  while read -r k; do
    u=$(redis-cli -p "$redis_port" memory usage "$k" samples 0)
    case "$k" in
      *:q:*) qsum=$((qsum + u)) qn=$((qn + 1)) ;;
      *) echo "| \`$k\` | $(redis-cli -p "$redis_port" object encoding "$k") | $(per "$u" "$members") |" ;;
    esac
  done < <(redis-cli -p "$redis_port" --scan | sort)
  echo "| \`rk:{mem}:q:*\` ($qn hashes) | | $(per "$qsum" "$members") |"
  for k in 'rk:{mem}:z' 'rk:{mem}:t'; do
    echo "$k: $(redis-cli -p "$redis_port" debug htstats-key "$k" | tr -d '\r' |
      grep -E 'table size|number of elements|Rehashing' | paste -sd' ')"
  done
} | tee -a "$out/summary.txt"
stop_all

# 2. The plain sorted set and the layouts written plainly.
free_port "plain_port"
start_redis "$plain_port" --enable-debug-command local
plain_pid=${pids[-1]}
python3 - "$members" "$work" "$lookups" $sizes <<'EOF'
import random, struct, sys, zlib
n, work, lookups = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sizes = [int(s) for s in sys.argv[4:]]
def resp(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
# bench/import_gen.py's entries (seed 7), in its order.
random.seed(7)
entries = []
for m in sorted("m%d" % i for i in range(n)):
    score = random.randint(-10**12, 10**12)
    ms = 1700000000000 + random.randint(0, 10**9)
    entries.append((m.encode(), score, struct.pack(">Q", ms)[2:]))
def nbuckets(size):  # size members a hash on average
    return -(-n // size)
files = {}
def write(name, cmd, key, pairs):
    with open("%s/%s.resp" % (work, name), "wb") as f:
        for at in range(0, len(pairs), 128):
            f.write(resp([cmd, key] + pairs[at:at + 128]))
def pairs(fn):
    out = []
    for e in entries:
        out += fn(*e)
    return out
write("plain", b"ZADD", b"plain", pairs(lambda m, s, p: [-s, m]))
write("zset", b"ZADD", b"rk:{b}:z", pairs(lambda m, s, p: [-s, p + m]))
write("t14", b"HSET", b"rk:{b}:t", pairs(lambda m, s, p: [m, p + struct.pack(">q", -s)]))
write("t12", b"HSET", b"rk:{b}:t12", pairs(lambda m, s, p: [m, p + struct.pack(">q", -s)[2:]]))
write("t6", b"HSET", b"rk:{b}:t6", pairs(lambda m, s, p: [m, p]))
for size in sizes:
    k = nbuckets(size)
    with open("%s/tb%d.resp" % (work, size), "wb") as f:
        for m, s, p in entries:
            j = zlib.crc32(m) % k
            f.write(resp([b"HSET", b"rk:{b}:t%d:%d" % (size, j), m, p + struct.pack(">q", -s)]))
    open("%s/tb%d.buckets" % (work, size), "w").write(str(k))
# The lookups: random members, the same order for every layout.
rnd = random.Random(11)
picks = [entries[rnd.randrange(n)][0] for _ in range(lookups)]
with open("%s/get-t14.resp" % work, "wb") as f:
    for m in picks:
        f.write(resp([b"HGET", b"rk:{b}:t", m]))
for size in sizes:
    k = nbuckets(size)
    with open("%s/get-tb%d.resp" % (work, size), "wb") as f:
        for m in picks:
            f.write(resp([b"HGET", b"rk:{b}:t%d:%d" % (size, zlib.crc32(m) % k), m]))
EOF
pipe() { # file
  redis-cli -p "$plain_port" --pipe <"$1" >"$work/pipe.out"
  grep -q 'errors: 0' "$work/pipe.out" || { cat "$work/pipe.out" >&2; exit 1; }
}
{
  echo
  echo "written plainly ($members members, redis-cli --pipe; hash-max-listpack-entries $(redis-cli -p "$plain_port" config get hash-max-listpack-entries | tail -1)):"
  echo "| layout | keys | encodings | used_memory B a member | MEMORY USAGE B a member |"
  echo "|---|---:|---|---:|---:|"
  for v in plain zset t14 t12 t6 $(for s in $sizes; do echo "tb$s"; done); do
    a=$(used "$plain_port")
    pipe "$work/$v.resp"
    b=$(used "$plain_port")
    case "$v" in
      plain) keys=(plain) ;;
      zset) keys=('rk:{b}:z') ;;
      t14) keys=('rk:{b}:t') ;;
      t12 | t6) keys=("rk:{b}:$v") ;;
      tb*)
        k=$(cat "$work/$v.buckets")
        mapfile -t keys < <(seq 0 $((k - 1)) | sed "s/^/rk:{b}:t${v#tb}:/")
        ;;
    esac
    usage=$(printf '%s\n' "${keys[@]}" | python3 -c '
import subprocess, sys
keys = sys.stdin.read().split()
cmds = "".join("MEMORY USAGE %s SAMPLES 0\nOBJECT ENCODING %s\n" % (k, k) for k in keys)
out = subprocess.run(["redis-cli", "-p", sys.argv[1]], input=cmds, capture_output=True,
                     text=True, check=True).stdout.split()
total = sum(int(x) for x in out[0::2])
enc = {}
for e in out[1::2]:
    enc[e] = enc.get(e, 0) + 1
print(total, ",".join("%s %d" % kv for kv in sorted(enc.items())))' "$plain_port")
    echo "| $v | ${#keys[@]} | ${usage#* } | $(per $((b - a)) "$members") | $(per "${usage%% *}" "$members") |"
  done
  for k in plain 'rk:{b}:z' 'rk:{b}:t'; do
    echo "$k: $(redis-cli -p "$plain_port" debug htstats-key "$k" | tr -d '\r' |
      grep -E 'table size|number of elements|Rehashing' | paste -sd' ')"
  done
} | tee -a "$out/summary.txt"

# 3. The CPU of an HGET: the same piped lookups, three times each,
# alternating: Redis's CPU a lookup (/proc: parse and reply included), and
# the HGET's own time (INFO commandstats usec_per_call: wall, so inflated
# when the machine is busy).
hget_usec() {
  redis-cli -p "$plain_port" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_hget:.*usec_per_call=\([0-9.]*\).*/\1/p'
}
{
  echo
  echo "HGET of $lookups random members, piped: Redis main thread's CPU us a lookup / HGET usec_per_call:"
  for round in 1 2 3; do
    for v in t14 $(for s in $sizes; do echo "tb$s"; done); do
      redis-cli -p "$plain_port" config resetstat >/dev/null
      c0=$(cpu_ns "$plain_pid")
      pipe "$work/get-$v.resp"
      c1=$(cpu_ns "$plain_pid")
      echo "round $round $v: $(python3 -c 'import sys; print("%.3f" % ((int(sys.argv[2]) - int(sys.argv[1])) / 1e3 / int(sys.argv[3])))' "$c0" "$c1" "$lookups") / $(hget_usec)"
    done
  done
} | tee -a "$out/summary.txt"

# 4. The same inside a script, as update.lua does its HGET: one EVAL loops
# over 200,000 (key, member) pairs 10 times; Redis's CPU over it (/proc)
# a lookup and the HGET's usec_per_call, three times each, alternating;
# "none" the same loop on a key that does not exist (a script call's own
# cost and a miss in the keyspace).
python3 - "$plain_port" "$members" "$plain_pid" $sizes <<'EOF2' | tee -a "$out/summary.txt"
import random, re, socket, struct, sys, time, zlib
port, n, pid = (int(a) for a in sys.argv[1:4])
sizes = [int(s) for s in sys.argv[4:]]
def cpu():
    return int(open("/proc/%d/task/%d/schedstat" % (pid, pid)).read().split()[0])
def resp(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
s = socket.create_connection(("127.0.0.1", port))
def call(args):
    s.sendall(resp(args))
    buf = s.recv(65536)
    if buf.startswith(b"$"):  # a bulk reply: read it whole
        size = int(buf[1:buf.index(b"\r\n")])
        while len(buf) < buf.index(b"\r\n") + 2 + size + 2:
            buf += s.recv(65536)
    else:
        while not buf.endswith(b"\r\n"):
            buf += s.recv(65536)
    assert not buf.startswith(b"-"), buf
    return buf
script = b"""local n = #ARGV / 2
for r = 1, 10 do
  for i = 1, n do redis.call('HGET', ARGV[2 * i - 1], ARGV[2 * i]) end
end
return n * 10"""
rnd = random.Random(13)
picks = [b"m%d" % rnd.randrange(n) for _ in range(200000)]
variants = [("none", lambda m: b"nokey"), ("t14", lambda m: b"rk:{b}:t")]
for size in sizes:
    k = -(-n // size)
    variants.append(("tb%d" % size, lambda m, k=k, size=size: b"rk:{b}:t%d:%d" % (size, zlib.crc32(m) % k)))
print()
print("HGET inside one EVAL, 2,000,000 lookups of random members: Redis main thread's CPU us a lookup / HGET usec_per_call:")
for round in (1, 2, 3):
    for name, key in variants:
        args = [b"EVAL", script, b"0"]
        for m in picks:
            args += [key(m), m]
        call([b"CONFIG", b"RESETSTAT"])
        c0 = cpu()
        call(args)
        c1 = cpu()
        stats = call([b"INFO", b"commandstats"]).decode()
        usec = re.search(r"cmdstat_hget:.*?usec_per_call=([0-9.]+)", stats).group(1)
        print("round %d %s: %.3f / %s" % (round, name, (c1 - c0) / 1e3 / 2000000, usec))
EOF2
