#!/bin/bash
# member_memory.sh -- Redis memory per member of one build, two ways:
# MEMBERS members given a score by `rank-bench --preload-only` (as
# bench/compare.sh's memory step does; its request-id records deleted
# after), and MEMBERS generated entries loaded by `rankctl import`
# (bench/import_gen.py: 12-digit scores). Prints used_memory's growth per
# member for each, the board's times hash per member (MEMORY USAGE), and
# a plain ZADD of as many members for the ratio.
#
# Usage: bash bench/member_memory.sh
# Environment: BUILD (default build/), MEMBERS (default 200000).
# A/B: BUILD=a bash bench/member_memory.sh; BUILD=b bash bench/member_memory.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
OUT=${OUT:-$(mktemp -d)}
bench_setup member-memory
rankctl=$build/rankctl

free_port "redis_port"
free_port "rankd_port"
start_redis "$redis_port"
start_rankd "$rankd_port" "$redis_port"
rcli() { redis-cli -p "$redis_port" "$@"; }
used() { rcli info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r'; }
per() { python3 -c 'import sys; print("%.1f" % ((int(sys.argv[2]) - int(sys.argv[1])) / int(sys.argv[3])))' "$@"; }

m0=$(used)
"$bench" --port "$rankd_port" --members "$members" --preload-only -c 16 >/dev/null 2>&1
rcli eval "for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end return 1" \
  0 'rk:{bench-0}:q*' >/dev/null
m1=$(used)
preload_t=$(rcli memory usage 'rk:{bench-0}:t' samples 0)

python3 "$here/import_gen.py" "$members" csv >"$work/gen.csv"
m2=$(used)
RANKCTL_CONNECT=127.0.0.1:$rankd_port "$rankctl" import memory "$work/gen.csv" >/dev/null
m3=$(used)
import_t=$(rcli memory usage 'rk:{memory}:t' samples 0)

m4=$(used)
rcli eval "for i=0,$((members - 1)) do redis.call('ZADD','plain:{memory}', i, 'm'..i) end return 1" 0 >/dev/null
m5=$(used)

echo "$build: $members members"
echo "  preload (rank-bench): $(per "$m0" "$m1" "$members") B a member, times hash $(per 0 "$preload_t" "$members") B"
echo "  rankctl import:       $(per "$m2" "$m3" "$members") B a member (with its request-id records), times hash $(per 0 "$import_t" "$members") B"
echo "  plain ZADD:           $(per "$m4" "$m5" "$members") B a member"
rmdir "$OUT" 2>/dev/null || true
