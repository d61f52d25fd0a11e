-- update.lua: applies one score update to a board, at most once per request id.
--
-- KEYS[1]  sorted set  rk:{board}:z    member = prefix .. member id, score = -score
-- KEYS[2]  hash        rk:{board}:t    member id -> its prefix: subscores (8 bytes
--                                      each, see orderkey.h), time (6 bytes, big-endian ms)
-- KEYS[3]  key prefix  rk:{board}:q    of the request-id records (see below)
-- KEYS[4]  sorted set  rk:{board}:d    distinct sorted-set scores (rank=dense only)
-- KEYS[5]  hash        rk:{board}:c    sorted-set score -> members with it (dense only)
-- KEYS[6]  hash        rk:{board}:a    member id -> its data (encoded by rankd)
-- ARGV     member, mode (1 INCREMENT, 2 BEST, 3 SET, 4 remove), value, time (6 bytes),
--          window (ms), fingerprint (4 bytes) of (member, mode, value),
--          request-id hash (10 bytes), request-id selector (0..2^32-1), now (ms),
--          rank wanted (1, or 0 on a shard of a sharded board: the rank within
--          one shard means nothing, and the reply gives rank 0),
--          order (desc: score = -score; asc: score = score, BEST keeps the lower),
--          rank kind (ordinal, competition or dense),
--          cap (0: none; else the shard keeps its best cap members),
--          expire at (Unix ms; periodic boards: when this period's keys go; 0: never),
--          subscores (8 bytes each, encoded to sort bytewise; '' on boards without),
--          subscores absent (1: an INCREMENT without them keeps the member's own;
--          the subscores given are then the 0s of a new member),
--          data given (1: replace the member's data with the next argument, which
--          when empty deletes it), data
--
-- Request-id records are packed: a record is one field (the 10-byte hash of
-- the request id) -> value (the fingerprint) of a small hash. Time is cut
-- into buckets of window/4. Bucket k has a meta hash rk:{board}:q:<k>
-- (g: generations, s<i>: record hashes of generation i, n: all records;
-- a generation closes when it holds 96 records per hash) and record hashes rk:{board}:q:<k>:<i>:<selector mod s<i>>.
-- A bucket opens with one generation sized from the previous bucket's n,
-- about 64 records per hash: small enough for Redis's compact listpack
-- encoding at any steady rate. When a generation fills (96 per hash: a new
-- board, a burst), the next has 32 times the hashes. A request id is looked
-- up in the current bucket and the 4 before it, so it is remembered for at
-- least the window; every key of bucket k expires at the end of bucket k+4.
--
-- Returns {score, rank, applied, subscores}: applied is 0 when the request id
-- was already used (nothing changes; score, rank and subscores are current, rank
-- 0 if the member is gone); subscores as stored (8 bytes each; '' if none).
-- A refusal is an error reply starting with "RANK_INVALID "; every check runs
-- before the first write, so a refused update changes nothing.
--
-- Try it: redis-cli EVAL "$(cat update.lua)" 6 'rk:{b}:z' 'rk:{b}:t' 'rk:{b}:q' \
--   'rk:{b}:d' 'rk:{b}:c' 'rk:{b}:a' alice 1 10 "$(printf '\0\0\0\0\0\1')" 3600000 \
--   fp01 request-1- 12345 1763800000000 1 desc ordinal 0 0 '' 0 0 ''

local zkey, tkey, qprefix, dkey, ckey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local akey = KEYS[6]
local member, mode, value = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local time, window, fingerprint = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local idhash, selector, now = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local rank_wanted = ARGV[10] == '1'
local ascending, kind, cap = ARGV[11] == 'asc', ARGV[12], tonumber(ARGV[13])
local expire_at = tonumber(ARGV[14])
local subs, keep_subs = ARGV[15], ARGV[16] == '1'
local data_given, data = ARGV[17] == '1', ARGV[18]
local nsub = #subs
local LIMIT = 9007199254740991
local BUCKETS = 4          -- buckets per window
local PER_HASH = 64        -- records aimed at per record hash
local FULL_HASH = 96       -- records per hash that open a new generation
local MAX_HASHES = 1048576
local MAX_GENERATIONS = 5

local width = math.ceil(window / BUCKETS)
local current = math.floor(now / width)

local function meta_key(k)
  return qprefix .. ':' .. string.format('%d', k)
end

local function record_hash(meta, generation, hashes)
  return meta .. ':' .. generation .. ':' .. string.format('%d', selector % hashes)
end

-- The fingerprint recorded for this request id, or nil; and the current
-- bucket's meta fields {g, s0..s4, n} for record().
local function recorded()
  local current_meta
  for k = current, current - BUCKETS, -1 do
    local meta = meta_key(k)
    local m = redis.call('HMGET', meta, 'g', 's0', 's1', 's2', 's3', 's4', 'n')
    if k == current then
      current_meta = m
    end
    local generations = tonumber(m[1])
    if generations then
      for g = generations - 1, 0, -1 do
        local v = redis.call('HGET', record_hash(meta, g, tonumber(m[g + 2])), idhash)
        if v then
          return v, current_meta
        end
      end
    end
  end
  return nil, current_meta
end

-- m: the current bucket's meta fields, as recorded() read them.
local function record(m)
  local meta = meta_key(current)
  local expire_at = (current + BUCKETS + 1) * width
  local generations = tonumber(m[1])
  local g, hashes
  if not generations then
    -- A new bucket: size it from the previous one.
    local previous = tonumber(redis.call('HGET', meta_key(current - 1), 'n') or '0')
    hashes = 1
    while hashes * PER_HASH < previous and hashes < MAX_HASHES do
      hashes = hashes * 2
    end
    g = 0
    redis.call('HSET', meta, 'g', 1, 's0', hashes, 'n', 0)
    redis.call('PEXPIREAT', meta, expire_at)
  else
    g = generations - 1
    hashes = tonumber(m[g + 2])
    -- Earlier generations closed exactly when full, so the newest one holds
    -- n minus their capacity.
    local in_newest = tonumber(m[7])
    for i = 0, g - 1 do
      in_newest = in_newest - tonumber(m[i + 2]) * FULL_HASH
    end
    -- More records than the hashes hold compactly (a new board, a burst):
    -- open a generation with 32 times the hashes.
    if in_newest >= hashes * FULL_HASH and generations < MAX_GENERATIONS then
      g = generations
      hashes = math.min(hashes * 32, MAX_HASHES)
      redis.call('HSET', meta, 'g', generations + 1, 's' .. g, hashes)
    end
  end
  redis.call('HINCRBY', meta, 'n', 1)
  local hash = record_hash(meta, g, hashes)
  redis.call('HSET', hash, idhash, fingerprint)
  redis.call('PEXPIREAT', hash, expire_at)
end

-- The sorted-set score of a score, and back: sorted sets order ascending.
local function zscore_of(score)
  return ascending and score or -score
end

local function zformat(score)
  return string.format('%d', zscore_of(score))
end

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

-- The member's sorted-set key, score and subscores, or nil if it is not on
-- the board.
local function place()
  local p = redis.call('HGET', tkey, member)
  if not p then
    return nil
  end
  local key = p .. member
  return key, zscore_of(tonumber(redis.call('ZSCORE', zkey, key))), string.sub(p, 1, nsub)
end

-- The member's rank (key, score): ordinal 1,2,3,4; competition 1,2,2,4 (1 +
-- those with a better score); dense 1,2,2,3 (1 + the better scores).
local function rank_of(key, score)
  if not rank_wanted then
    return 0
  elseif kind == 'competition' then
    return redis.call('ZCOUNT', zkey, '-inf', '(' .. zformat(score)) + 1
  elseif kind == 'dense' then
    return redis.call('ZCOUNT', dkey, '-inf', '(' .. zformat(score)) + 1
  end
  return redis.call('ZRANK', zkey, key) + 1
end

-- Dense boards count the members at each score: the distinct scores are a
-- sorted set of their own, for ranks without a scan.
local function count_score(score, delta)
  local zs = zformat(score)
  local n = redis.call('HINCRBY', ckey, zs, delta)
  if n <= 0 then
    redis.call('HDEL', ckey, zs)
    redis.call('ZREM', dkey, zs)
  elseif n == 1 and delta == 1 then
    redis.call('ZADD', dkey, zs, zs)
  end
end

local seen, current_meta = recorded()
if seen then
  if seen ~= fingerprint then
    return redis.error_reply('RANK_INVALID request_id: already used on this board ' ..
      'for another member, value, mode, subscores or data')
  end
  local key, score, current_subs = place()
  if not key then
    return {0, 0, 0, ''}
  end
  return {score, rank_of(key, score), 0, current_subs}
end

local key, old, old_subs = place()
-- Remove (mode 4, rankd's Remove): the member and its data go. Returns {the
-- score it had, 1 if it was on the board, 1}.
if mode == 4 then
  if key then
    redis.call('ZREM', zkey, key)
    redis.call('HDEL', tkey, member)
    redis.call('HDEL', akey, member)
    if kind == 'dense' then
      count_score(old, -1)
    end
  end
  record(current_meta)
  return {old or 0, key and 1 or 0, 1, ''}
end
if keep_subs and old_subs then
  subs = old_subs
end
local new, new_subs = old, old_subs
if mode == 1 then
  new, new_subs = (old or 0) + value, subs
elseif mode == 2 then
  -- BEST compares the whole (score, subscores) tuple and keeps one of the two.
  if old == nil or (ascending and value < old) or (not ascending and value > old)
      or (value == old and before(subs, old_subs)) then
    new, new_subs = value, subs
  end
else
  new, new_subs = value, subs
end
-- Only an increment can leave the range (rankd checks value itself). The sum
-- of two exact integers rounds past the limit if it is past it, so the test
-- is exact; the message prints its operands, which are exact too.
if new > LIMIT or new < -LIMIT then
  return redis.error_reply(string.format(
    'RANK_INVALID value: current score %d + %d is outside -%d..%d',
    old or 0, value, LIMIT, LIMIT))
end

-- An update that leaves the score (and subscores) as they were keeps the old
-- time: whoever reached a score first stays ahead of those who reach it later.
local moved = new ~= old or new_subs ~= old_subs
if moved then
  if key then
    redis.call('ZREM', zkey, key)
  end
  key = new_subs .. time .. member
  redis.call('ZADD', zkey, zformat(new), key)
  redis.call('HSET', tkey, member, new_subs .. time)
end
if data_given then
  if data == '' then
    redis.call('HDEL', akey, member)
  else
    redis.call('HSET', akey, member, data)
  end
end
if new ~= old then
  if kind == 'dense' then
    if old then
      count_score(old, -1)
    end
    count_score(new, 1)
  end
end
-- A capped board keeps its best cap members: one more drops the worst,
-- which ties lose to those who got there first. If that is this member, the
-- update did not make the cut: applied, but not ranked.
local ranked = true
if cap > 0 and moved and redis.call('ZCARD', zkey) > cap then
  local worst = redis.call('ZPOPMAX', zkey)
  local gone = string.sub(worst[1], nsub + 7)
  redis.call('HDEL', tkey, gone)
  redis.call('HDEL', akey, gone)
  if kind == 'dense' then
    count_score(zscore_of(tonumber(worst[2])), -1)
  end
  ranked = worst[1] ~= key
end
if expire_at > 0 then
  redis.call('PEXPIREAT', zkey, expire_at)
  redis.call('PEXPIREAT', tkey, expire_at)
  redis.call('PEXPIREAT', akey, expire_at)
  if kind == 'dense' then
    redis.call('PEXPIREAT', dkey, expire_at)
    redis.call('PEXPIREAT', ckey, expire_at)
  end
end
record(current_meta)
return {new, ranked and rank_of(key, new) or 0, 1, ranked and new_subs or ''}
