-- rank.lua: a member's place on a board, counted on one Redis node.
--
-- An ordinary board is one shard: find with KEYS[1], KEYS[2] gives its rank
-- (ahead + 1) in one call. On a sharded board the node of the member's shard
-- runs find, then every other node holding shards runs count.
--
-- find   KEYS[1]   hash        rk:{board}:t, or rk:s:{board/i}:t of the member's shard i
--        KEYS[2]   sorted set  rk:{board}:z, or rk:s:{board/i}:z
--        KEYS[3..] the sorted sets of the board's other shards on this node
--        ARGV      'find', member id
--        Returns false if the member is not on the board, else
--        {score, entries ahead of it on this node, its order key, its sorted-set score}.
-- count  KEYS[1..] sorted sets of the board's shards on this node
--        ARGV      'count', sorted-set score, order key (from find)
--        Returns the number of entries ahead of (score, key) in them.
--
-- "Ahead" is the sorted-set order of an ordinary board: a lower sorted-set
-- score (-score), or the same and a lower order key (time prefix, then member
-- id) bytewise. No member is in two shards, so 1 + the entries ahead over all
-- shards is the rank the same entries would have on one ordinary board.
--
-- Try it: redis-cli EVAL "$(cat rank.lua)" 3 'rk:s:{b/0}:t' 'rk:s:{b/0}:z' 'rk:s:{b/1}:z' find alice

-- a < b bytewise, as Redis orders members of equal score (Lua's own string
-- comparison follows the server's locale).
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Entries of sorted set z ahead of (s, key): those with a lower score, then
-- a binary search among those with score s, which Redis keeps ordered by key.
local function ahead(z, s, key)
  local below = redis.call('ZCOUNT', z, '-inf', '(' .. s)
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

if ARGV[1] == 'count' then
  return count_from(1, ARGV[2], ARGV[3])
end

local p = redis.call('HGET', KEYS[1], ARGV[2])
if not p then
  return false
end
local key = p .. ARGV[2]
local s = redis.call('ZSCORE', KEYS[2], key)
return {-tonumber(s), redis.call('ZRANK', KEYS[2], key) + count_from(3, s, key), key, s}
