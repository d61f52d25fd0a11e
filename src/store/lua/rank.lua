-- rank.lua: a member's place on a board, counted on one Redis node.
--
-- An ordinary board is one shard: find gives its rank (ahead + 1) in one
-- call. On a sharded board the node of the member's shard runs find, then
-- every other node holding shards runs count.
--
-- ARGV[1] 'find' or 'count'; ARGV[2] rank kind: 'ordinal', 'competition',
-- 'dense' (one shard: count the board's distinct-score set) or 'dense-list'
-- (several shards: list the distinct scores ahead, which rankd unions, at
-- most ARGV[3] + 1 per shard); ARGV[4] the length of the board's prefixes
-- (time and subscores), which start a member's value in the times hash.
--
-- find   KEYS[1]   hash        rk:{board}:t, or rk:s:{board/i}:t of the member's shard i
--        KEYS[2]   sorted set  rk:{board}:z, or rk:s:{board/i}:z
--        KEYS[3..] ordinal, competition: the sorted sets of the board's other
--                  shards on this node; dense: the distinct-score set
--                  rk:{board}:d; dense-list: the distinct-score sets of all
--                  the board's shards on this node
--        ARGV[5..] member ids: the finds rankd queued for these keys in one
--        loop iteration (backend.c batches)
--        Returns one reply per member: false if the member is not on the
--        board, else {entries ahead of it on this node (dense-list: 0), its
--        order key, its sorted-set score as an integer's text (rankd
--        derives the score from it),
--        [dense-list: the distinct sorted-set scores ahead]}.
-- count  KEYS[1..] the board's sorted sets on this node (dense: its
--                  distinct-score set; dense-list: the shards' distinct-score sets)
--        ARGV[5], ARGV[6]  sorted-set score, order key (from find)
--        Returns the number of entries ahead (dense-list: the scores ahead).
--
-- "Ahead" for ordinal ranks is the sorted-set order of an ordinary board: a
-- lower sorted-set score (-score, or score on asc boards), or the same and a
-- lower order key (time prefix, then member id) bytewise. For competition
-- ranks it is a strictly better score; for dense ranks, a distinct better
-- score. No member is in two shards, so 1 + the sum over all shards is the
-- rank the same entries would have on one ordinary board.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua rank.lua)" 3 'rk:s:{b/0}:t' 'rk:s:{b/0}:z' 'rk:s:{b/1}:z' \
--   find ordinal 0 6 alice

local op, kind, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local prefix_len = tonumber(ARGV[4])

-- Entries of sorted set z ahead of (s, key).
local function ahead(z, s, key)
  local below = redis.call('ZCOUNT', z, '-inf', '(' .. s)
  if kind == 'competition' then
    return below
  end
  -- Ordinal: those with score s come in key order; binary search them.
  local lo, hi = 0, redis.call('ZCOUNT', z, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local k = redis.call('ZRANGE', z, below + mid, below + mid)[1]
    if before(k, key) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return below + lo
end

local function count_from(first, s, key)
  local n = 0
  for i = first, #KEYS do
    n = n + ahead(KEYS[i], s, key)
  end
  return n
end

-- The distinct sorted-set scores below s in the distinct-score sets
-- KEYS[first..], each set's list cut at limit + 1 (rankd refuses then).
local function distinct_from(first, s)
  local seen, out = {}, {}
  for i = first, #KEYS do
    for _, v in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '(' .. s,
                                  'LIMIT', 0, limit + 1)) do
      if not seen[v] then
        seen[v] = true
        out[#out + 1] = v
      end
    end
  end
  return out
end

if op == 'count' then
  if kind == 'dense-list' then
    return distinct_from(1, ARGV[5])
  elseif kind == 'dense' then
    return redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[5])
  end
  return count_from(1, ARGV[5], ARGV[6])
end

-- The entries ahead of the member whose sorted-set key is key, score s.
local function entry(key, s)
  if kind == 'dense' then
    return {redis.call('ZCOUNT', KEYS[3], '-inf', '(' .. s), key, s}
  elseif kind == 'dense-list' then
    return {0, key, s, distinct_from(3, s)}
  end
  local own = kind == 'competition' and redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. s)
    or redis.call('ZRANK', KEYS[2], key)
  if not own then
    return false -- in the times hash, not in the sorted set: not on the board
  end
  return {own + count_from(3, s, key), key, s}
end

-- Every member's place in one HMGET: its value in the times hash is its
-- prefix, then its sorted-set score as a big-endian 8-byte integer
-- (update.lua's place), written with the sorted set in one script, so no
-- ZMSCORE is needed. Its text is %d of that integer, which
-- rank_orderkey_parse_zscore reads and count's ZCOUNTs take as it is.
local members = {unpack(ARGV, 5)}
local found = {}
if #members == 0 then
  return found
end
local places = call_on(KEYS[1], 'hash', 'member times', 'HMGET', unpack(members))
local place_len = prefix_len + 8
for i = 1, #members do
  local v = places[i]
  found[i] = false
  if v then
    if #v ~= place_len then
      damaged(KEYS[1], 'value of ' .. #v .. ' bytes for member ' .. members[i],
        'value of ' .. place_len .. ' bytes', 'member times')
    end
    found[i] = entry(sub(v, 1, prefix_len) .. members[i],
      string.format('%d', (struct.unpack('>i8', v, prefix_len + 1))))
  end
end
return found
