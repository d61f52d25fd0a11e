#!/bin/bash
# lua_unpack.sh -- what unpacking an import's batch of SETs costs Redis's
# Lua alone, three ways, timed inside one redis-server (bench/README.md,
# the import section): the pack update.lua read before layout 4
# (string.byte and four string.subs an entry, into the HSET and ZADD
# tables; update.lua's unpack_sets now also cuts each entry's place, its
# prefix again and 8 bytes of score, so rerun it in that form before
# quoting it against today's script), one
# struct.unpack an entry, and cmsgpack.unpack of three msgpack arrays
# (members, HSET's pairs, ZADD's pairs). Each EVAL unpacks a 250-entry
# pack REPEAT times; the three alternate, ROUNDS times.
# Usage: bash bench/lua_unpack.sh       Environment: REPEAT=2000 ROUNDS=3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"
bench_setup lua-unpack
repeat=${REPEAT:-2000}
free_port "redis_port"
start_redis "$redis_port"
bench_meta "REPEAT=$repeat ROUNDS=$rounds bash bench/lua_unpack.sh" | tee "$out/meta.txt"

# The 250 entries: member, prefix (6 bytes), value (a 13-digit score).
entries='
local char = string.char
local E = {}
for i = 1, 250 do
  E[i] = {"member-" .. (100000 + i), char(0, 1, 2, 3, 4, i % 256),
    tostring(-1234567890123 - i)}
end'

cat >"$work/subs.lua" <<EOF
$entries
local sub, byte = string.sub, string.byte
local parts = {}
for i, e in ipairs(E) do
  parts[i] = char(0, #e[1], #e[2], #e[3], 0, 0, 0) .. e[2] .. e[1] .. e[3]
end
local pack, n = table.concat(parts), 0
for r = 1, tonumber(ARGV[1]) do
  local members, hset, zadd = {}, {}, {}
  local k, at, last = 0, 1, #pack
  while at <= last do
    local mhi, mlo, plen, vlen, dgiven, dhi, dlo = byte(pack, at, at + 6)
    local p0 = at + 7
    local m0 = p0 + plen
    local v0 = m0 + mhi * 256 + mlo
    local d0 = v0 + vlen
    local member = sub(pack, m0, v0 - 1)
    at = d0 + dhi * 256 + dlo
    k = k + 1
    members[k] = member
    hset[2 * k - 1], hset[2 * k] = member, sub(pack, p0, m0 - 1)
    zadd[2 * k - 1], zadd[2 * k] = sub(pack, v0, d0 - 1), sub(pack, p0, v0 - 1)
  end
  n = n + k
end
return n
EOF

cat >"$work/struct.lua" <<EOF
$entries
local parts = {}
for i, e in ipairs(E) do
  parts[i] = struct.pack('>Bc0Hc0Bc0BHc0', #e[2], e[2], #e[1], e[1], #e[3],
    e[3], 0, 0, '')
end
local pack, n, sunpack = table.concat(parts), 0, struct.unpack
for r = 1, tonumber(ARGV[1]) do
  local members, hset, zadd = {}, {}, {}
  local k, at, last = 0, 1, #pack
  while at <= last do
    local prefix, member, value, dgiven, data
    prefix, member, value, dgiven, data, at = sunpack('>Bc0Hc0Bc0BHc0', pack, at)
    k = k + 1
    members[k] = member
    hset[2 * k - 1], hset[2 * k] = member, prefix
    zadd[2 * k - 1], zadd[2 * k] = value, prefix .. member
  end
  n = n + k
end
return n
EOF

cat >"$work/msgpack.lua" <<EOF
$entries
local members, hset, zadd = {}, {}, {}
for i, e in ipairs(E) do
  members[i] = e[1]
  hset[2 * i - 1], hset[2 * i] = e[1], e[2]
  zadd[2 * i - 1], zadd[2 * i] = e[3], e[2] .. e[1]
end
local pack, n = cmsgpack.pack(members, hset, zadd), 0
for r = 1, tonumber(ARGV[1]) do
  local m = cmsgpack.unpack(pack)
  n = n + #m
end
return n
EOF

{
  echo "entries per variant and round: $((250 * repeat))"
  for round in $(seq 1 "$rounds"); do
    for v in subs struct msgpack; do
      start=$(date +%s%N)
      redis-cli -p "$redis_port" --eval "$work/$v.lua" , "$repeat" >/dev/null
      end=$(date +%s%N)
      echo "round $round $v: $(( (end - start) / 1000000 )) ms"
    done
  done
} | tee "$out/summary.txt"
