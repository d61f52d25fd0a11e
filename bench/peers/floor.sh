#!/bin/sh
# floor.sh -- the floor of an idempotent update: the minimal script a team
# would write by hand (SET NX EX of the request id, ZSCORE, ZADD; no exact
# ties, no reuse check, no batching), run by redis-benchmark with 4
# connections x 16 pipelined. Prints one rank-bench style JSON line: ops/s,
# p50/p99 from redis-benchmark, and Redis's CPU per update from
# /proc/PID/stat over the run.
#
# Usage: sh bench/peers/floor.sh --redis HOST:PORT --pid REDIS_PID
#          --members N [--requests N] [--preload] [--rank]
# --preload first gives N members a score in the floor's own sorted set,
# named as redis-benchmark names them (m and 12 digits). --rank adds what
# rankd's Update answers and the minimal script does not: the member's rank
# after the update (ZREVRANK), as the row floor-rank.
set -eu
host=127.0.0.1 port=6379 pid= members=1000000 requests=400000 preload=0 rank=0
while [ $# -gt 0 ]; do
  case $1 in
  --redis) host=${2%:*} port=${2##*:}; shift 2 ;;
  --pid) pid=$2; shift 2 ;;
  --members) members=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --preload) preload=1; shift ;;
  --rank) rank=1; shift ;;
  *) echo "floor.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
rcli() { redis-cli -h "$host" -p "$port" "$@"; }
if [ "$preload" = 1 ]; then
  rcli eval "for i = 0, $((members - 1)) do redis.call('ZADD', KEYS[1], i, string.format('m%012d', i)) end return 1" \
    1 'floor:{board}' >/dev/null
  exit 0
fi
[ -n "$pid" ] || { echo "floor.sh: --pid of redis-server needed" >&2; exit 2; }
# KEYS: request-id key, board; ARGV: member, score. BEST: the higher stays.
# With --rank it answers the member's rank after the update, as rankd does.
target=floor answer='return 1'
if [ "$rank" = 1 ]; then
  target=floor-rank answer="return redis.call('ZREVRANK', KEYS[2], ARGV[1]) + 1"
fi
sha=$(rcli script load "
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', 3600) then return 0 end
local old = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not old or tonumber(ARGV[2]) > tonumber(old) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
end
$answer")
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
# Two random numbers make a request id of 10^24, so none repeats; the
# member and the score come from the population.
csv=$(redis-benchmark -h "$host" -p "$port" -c 4 -P 16 -n "$requests" \
  -r "$members" --csv evalsha "$sha" 2 'floor:{board}:r:__rand_int____rand_int__' \
  'floor:{board}' m__rand_int__ __rand_int__ | tail -1)
t1=$(ticks)
echo "$csv" | awk -F'","' -v n="$requests" -v t="$((t1 - t0))" -v hz="$hz" -v target="$target" '{
  gsub(/"/, "", $0); split($0, f, ",")
  printf "{\"target\":\"%s\",\"connections\":4,\"pipeline\":16,", target
  printf "\"ops\":{\"update\":{\"count\":%d,\"errors\":0,\"ops_per_sec\":%s,", n, f[2]
  printf "\"p50_us\":%.1f,\"p99_us\":%.1f}},", f[5] * 1000, f[7] * 1000
  printf "\"cpu_us_per_op\":{\"redis\":%.2f}}\n", t * 1e6 / hz / n
}'
