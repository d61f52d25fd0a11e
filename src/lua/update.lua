-- update.lua: applies one score update to a board, at most once per request id.
--
-- KEYS[1]  sorted set  rk:{board}:z    member = prefix .. member id, score = -score
-- KEYS[2]  hash        rk:{board}:t    member id -> its prefix: subscores (8 bytes
--                                      each, see orderkey.h), time (6 bytes, big-endian ms)
-- KEYS[3]  hash        rk:{board}:q    meta of the request-id records, and the
--                                      prefix of their hashes (see below)
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
--          when empty deletes it), data,
--          the request-id buckets looked in: k, k-1, .., k-4 for the current
--          bucket k = floor(now / ceil(window / 4)), and the expiry of bucket
--          k's records, (k + 5) * ceil(window / 4) (Unix ms): numbers rankd
--          formats, as string.format here costs Redis more
--
-- Request-id records are packed: a record is one field (the 10-byte hash of
-- the request id) -> value (the fingerprint) of a small hash. Time is cut
-- into buckets of window/4. Bucket k has record hashes
-- rk:{board}:q:<k>:<i>:<selector mod s_i> in generations i = 0, 1, ... (at
-- most 5). The board keeps the meta of all its buckets in one hash,
-- rk:{board}:q: field <k> lists the hash counts s_0,s_1,... of bucket k's
-- generations ("1,32"), field <k>:n counts its records. A bucket opens with
-- one generation sized from the previous bucket's n, about 64 records per
-- hash: small enough for Redis's compact listpack encoding at any steady
-- rate. When a generation fills (96 per hash: a new board, a burst), the next
-- has 32 times the hashes. A request id is looked up in the current bucket and
-- the 4 before it (one HMGET of the meta hash, then one HGET per generation),
-- so it is remembered for at least the window; every record hash of bucket k
-- expires at the end of bucket k+4. Opening a bucket deletes the meta fields
-- of the buckets out of the window and has the meta hash expire with the
-- records of its newest bucket.
--
-- Returns {score, rank, applied, subscores}: applied is 0 when the request id
-- was already used (nothing changes; score, rank and subscores are current, rank
-- 0 if the member is gone); subscores as stored (8 bytes each; '' if none).
-- A refusal is an error reply starting with "RANK_INVALID "; a key of another
-- type than rankd keeps there (damaged data) is "RANK_DAMAGED ...". Every
-- check, and every command that can fail, runs before the first write: a
-- refused or failed update changes nothing and records nothing.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua update.lua)" 6 'rk:{b}:z' 'rk:{b}:t' 'rk:{b}:q' \
--   'rk:{b}:d' 'rk:{b}:c' 'rk:{b}:a' alice 1 10 "$(printf '\0\0\0\0\0\1')" 3600000 \
--   fp01 request-1- 12345 1763800000000 1 desc ordinal 0 0 '' 0 0 '' \
--   1959777 1959776 1959775 1959774 1959773 1763803800000

local zkey, tkey, qprefix, dkey, ckey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local akey = KEYS[6]
-- The arguments, one a line, in the order rankd gives them (store_update.c,
-- UpdateArg; tests/test_requestid.c checks that the two agree).
local member = ARGV[1]
local mode = ARGV[2]
local value = ARGV[3]
local time = ARGV[4]
local window = ARGV[5]
local fingerprint = ARGV[6]
local idhash = ARGV[7]
local selector = ARGV[8]
local now = ARGV[9]
local rank_wanted = ARGV[10]
local order = ARGV[11]
local kind = ARGV[12]
local cap = ARGV[13]
local expire_at = ARGV[14]
local subs = ARGV[15]
local keep_subs = ARGV[16]
local data_given = ARGV[17]
local data = ARGV[18]
-- The buckets looked in, by name: names[0] the current one, names[i] the
-- one i before it.
local names = {[0] = ARGV[19], ARGV[20], ARGV[21], ARGV[22], ARGV[23]}
local record_expire_at = ARGV[24]

value, window, selector, now = tonumber(value), tonumber(window),
  tonumber(selector), tonumber(now)
rank_wanted, keep_subs, data_given = rank_wanted == '1', keep_subs == '1',
  data_given == '1'
local ascending = order == 'asc'
local nsub = #subs
local LIMIT = 9007199254740991
local BUCKETS = 4          -- buckets per window
local PER_HASH = 64        -- records aimed at per record hash
local FULL_HASH = 96       -- records per hash that open a new generation
local MAX_HASHES = 1048576
local MAX_GENERATIONS = 5

local width = math.ceil(window / BUCKETS)
local current = math.floor(now / width)

-- The current bucket's newest record hash, once recorded() has named it.
local current_hash, current_layout

local function record_hash(bucket, generation, hashes)
  return qprefix .. ':' .. bucket .. ':' .. generation .. ':' ..
    string.format('%d', selector % hashes)
end

-- The hash counts of a bucket's generations, oldest first, from its meta
-- field ("1,32"; "4096", one generation, is the usual case).
local function generations_of(layout)
  local one = tonumber(layout)
  if one then
    return {one}
  end
  local s = {}
  for hashes in string.gmatch(layout, '%d+') do
    s[#s + 1] = tonumber(hashes)
  end
  return s
end

local function hget_record(hash)
  return call_on(hash, 'hash', 'request-id records', 'HGET', idhash)
end

-- The board's meta: the generations of the 5 buckets, the current bucket's n.
local meta = call_on(qprefix, 'hash', 'request-id meta', 'HMGET', names[0],
  names[1], names[2], names[3], names[4], names[0] .. ':n')

-- The fingerprint recorded for this request id, or nil. The newest
-- generation of each bucket first.
local function recorded()
  for i = 0, BUCKETS do
    local layout = meta[i + 1]
    if layout then
      local hashes = tonumber(layout) -- one generation: the usual case
      if hashes then
        local hash = record_hash(names[i], 0, hashes)
        if i == 0 then
          current_hash, current_layout = hash, layout
        end
        local v = hget_record(hash)
        if v then
          return v
        end
      else
        local s = generations_of(layout)
        for g = #s, 1, -1 do
          local v = hget_record(record_hash(names[i], g - 1, s[g]))
          if v then
            return v
          end
        end
      end
    end
  end
  return nil
end

-- How the request id will be recorded in the current bucket (after
-- recorded()): reads only, so that record() runs after every check.
local function plan_record()
  local name = names[0]
  local layout, n = meta[1], tonumber(meta[6]) or 0
  local plan = {}
  if not layout then
    -- A new bucket (once per window/4). The meta of buckets out of the
    -- window goes, and of those more than 4 buckets ahead (another window
    -- length, a clock far off); the previous bucket's n sizes this one.
    local fields = call_on(qprefix, 'hash', 'request-id meta', 'HGETALL')
    local stale, newest, previous = {}, current, 0
    for j = 1, #fields, 2 do
      local f = fields[j]
      local k = tonumber(string.match(f, '^%-?%d+'))
      if not k or k < current - BUCKETS or k > current + BUCKETS then
        stale[#stale + 1] = f
      elseif k > newest then
        newest = k
      end
      if f == names[1] .. ':n' then
        previous = tonumber(fields[j + 1]) or 0
      end
    end
    plan.stale = stale
    local hashes = 1
    while hashes * PER_HASH < previous and hashes < MAX_HASHES do
      hashes = hashes * 2
    end
    layout = string.format('%d', hashes)
    plan.meta_expire_at = (newest + BUCKETS + 1) * width
  end
  local s = generations_of(layout)
  local g = #s
  local hashes = s[g]
  -- Earlier generations closed exactly when full, so the newest one holds
  -- n minus their capacity.
  local in_newest = n
  for i = 1, g - 1 do
    in_newest = in_newest - s[i] * FULL_HASH
  end
  -- More records than the hashes hold compactly (a new board, a burst):
  -- open a generation with 32 times the hashes.
  if in_newest >= hashes * FULL_HASH and g < MAX_GENERATIONS then
    g = g + 1
    hashes = math.min(hashes * 32, MAX_HASHES)
    layout = layout .. ',' .. string.format('%d', hashes)
  end
  plan.set = {name .. ':n', n + 1}
  if layout ~= meta[1] then
    plan.set[3], plan.set[4] = name, layout
  end
  plan.hash = current_hash
  if layout ~= current_layout then
    plan.hash = record_hash(name, g - 1, hashes)
    -- Not read by recorded(): it is written below.
    expect(plan.hash, 'hash', 'request-id records')
  end
  return plan
end

-- Records the request id as planned.
local function record(plan)
  if plan.stale and #plan.stale > 0 then
    redis.call('HDEL', qprefix, unpack(plan.stale))
  end
  redis.call('HSET', qprefix, unpack(plan.set))
  if plan.meta_expire_at then
    redis.call('PEXPIREAT', qprefix, plan.meta_expire_at)
  end
  redis.call('HSET', plan.hash, idhash, fingerprint)
  redis.call('PEXPIREAT', plan.hash, record_expire_at)
end

-- The sorted-set score of a score, and back: sorted sets order ascending.
local function zscore_of(score)
  return ascending and score or -score
end

local function zformat(score)
  return string.format('%d', zscore_of(score))
end

-- The member's sorted-set key, score and subscores, or nil if it is not on
-- the board.
local function place()
  local p = call_on(tkey, 'hash', 'member times', 'HGET', member)
  if not p then
    return nil
  end
  local key = p .. member
  local s = call_on(zkey, 'zset', 'scores', 'ZSCORE', key)
  return key, zscore_of(tonumber(s)), string.sub(p, 1, nsub)
end

-- The member's rank (key, score): ordinal 1,2,3,4; competition 1,2,2,4 (1 +
-- those with a better score); dense 1,2,2,3 (1 + the better scores).
local function rank_of(key, score)
  if not rank_wanted then
    return 0
  elseif kind == 'competition' then
    return redis.call('ZCOUNT', zkey, '-inf', '(' .. zformat(score)) + 1
  elseif kind == 'dense' then
    return call_on(dkey, 'zset', 'distinct scores', 'ZCOUNT', '-inf',
      '(' .. zformat(score)) + 1
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

-- Before the first write: the keys this update writes that it has not read
-- (a read of the wrong type has failed already) hold their types.
local function check_writes(known)
  if not known then
    expect(zkey, 'zset', 'scores')
  end
  if data_given or mode == '4' or cap ~= '0' then
    expect(akey, 'hash', 'member data')
  end
  if kind == 'dense' then
    expect(dkey, 'zset', 'distinct scores')
    expect(ckey, 'hash', 'members per score')
  end
  return plan_record()
end

local seen = recorded()
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
if mode == '4' then
  local plan = check_writes(key ~= nil)
  if key then
    redis.call('ZREM', zkey, key)
    redis.call('HDEL', tkey, member)
    redis.call('HDEL', akey, member)
    if kind == 'dense' then
      count_score(old, -1)
    end
  end
  record(plan)
  return {old or 0, key and 1 or 0, 1, ''}
end
if keep_subs and old_subs then
  subs = old_subs
end
local new, new_subs = old, old_subs
if mode == '1' then
  new, new_subs = (old or 0) + value, subs
elseif mode == '2' then
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
local plan = check_writes(key ~= nil)

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
if cap ~= '0' and moved and redis.call('ZCARD', zkey) > tonumber(cap) then
  local worst = redis.call('ZPOPMAX', zkey)
  local gone = string.sub(worst[1], nsub + 7)
  redis.call('HDEL', tkey, gone)
  redis.call('HDEL', akey, gone)
  if kind == 'dense' then
    count_score(zscore_of(tonumber(worst[2])), -1)
  end
  ranked = worst[1] ~= key
end
if expire_at ~= '0' then
  redis.call('PEXPIREAT', zkey, expire_at)
  redis.call('PEXPIREAT', tkey, expire_at)
  redis.call('PEXPIREAT', akey, expire_at)
  if kind == 'dense' then
    redis.call('PEXPIREAT', dkey, expire_at)
    redis.call('PEXPIREAT', ckey, expire_at)
  end
end
record(plan)
return {new, ranked and rank_of(key, new) or 0, 1, ranked and new_subs or ''}
