#!/bin/bash
# import_once.sh -- one `rankctl import` of MEMBERS generated entries
# (bench/import_gen.py) into an empty board, for an A/B of two builds run
# alternately: prints entries/s, Redis's CPU per entry split into user and
# system time (INFO cpu), rankd's (/proc/PID/stat) and rankctl's (its
# rusage).
#
# Usage: bash bench/import_once.sh
# Environment: BUILD (default build/), MEMBERS (default 300000).
# A/B: for r in 1 2 3; do BUILD=a bash bench/import_once.sh;
#      BUILD=b bash bench/import_once.sh; done
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
MEMBERS=${MEMBERS:-300000}
OUT=${OUT:-$(mktemp -d)}
bench_setup import-once
rankctl=$build/rankctl
[ -x "$rankctl" ] || { echo "no $rankctl: build first" >&2; exit 1; }

free_port "redis_port"
free_port "rankd_port"
start_redis "$redis_port"
start_rankd "$rankd_port" "$redis_port"
python3 "$here/import_gen.py" "$members" csv >"$work/gen.csv"

redis_cpu() { # "sys user", seconds
  redis-cli -p "$redis_port" INFO cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/{printf "%s ", $2}'
}
rankd_cpu() { awk '{print $14, $15}' "/proc/$rankd_pid/stat"; } # ticks
r0=$(redis_cpu)
k0=$(rankd_cpu)
t0=$(date +%s.%N)
# rankctl's CPU: its rusage, as this shell's `times` reports the children
# waited for (the second line; the generator's is taken out by the
# difference; in a $(...) subshell it would count the subshell's own).
times >"$work/c0"
RANKCTL_CONNECT=127.0.0.1:$rankd_port "$rankctl" import bench_a "$work/gen.csv" >/dev/null
t1=$(date +%s.%N)
times >"$work/c1"
c0=$(tail -1 "$work/c0")
c1=$(tail -1 "$work/c1")
r1=$(redis_cpu)
k1=$(rankd_cpu)
python3 - "$build" "$members" "$t0" "$t1" "$r0" "$r1" "$k0" "$k1" "$(getconf CLK_TCK)" "$c0" "$c1" <<'EOF'
import re, sys
build, n, t0, t1, r0, r1, k0, k1, hz, c0, c1 = sys.argv[1:]
n, hz = int(n), int(hz)
rs0, ru0 = (float(x) for x in r0.split())
rs1, ru1 = (float(x) for x in r1.split())
ku0, ks0 = (int(x) for x in k0.split())
ku1, ks1 = (int(x) for x in k1.split())
us = lambda s: s * 1e6 / n
def seconds(times):  # "0m1.234s 0m0.056s": user, sys
    return [int(m) * 60 + float(s) for m, s in
            re.findall(r"(\d+)m([\d.]+)s", times)]
cu0, cs0 = seconds(c0)
cu1, cs1 = seconds(c1)
print("%s: %d entries, %.0f/s; Redis user %.2f sys %.2f us/entry; "
      "rankd user %.2f sys %.2f us/entry; rankctl user %.2f sys %.2f "
      "us/entry" % (
          build, n, n / (float(t1) - float(t0)), us(ru1 - ru0), us(rs1 - rs0),
          us((ku1 - ku0) / hz), us((ks1 - ks0) / hz), us(cu1 - cu0),
          us(cs1 - cs0)))
EOF
rmdir "$out" 2>/dev/null || true
