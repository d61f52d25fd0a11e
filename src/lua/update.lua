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
-- Upgrade from the layout before, with a meta hash per bucket
-- (rk:{board}:q:<k>: g generations, s0..s4, n; the same record hashes):
-- field since of the meta hash (Unix ms) says that buckets starting before it
-- may hold records in that layout (0: none), and those are looked up there
-- too, so a retry across the upgrade is still recognised; a window later no
-- bucket is that old. A new meta hash (no since) looks in both layouts for
-- every bucket; its first record sets since and takes over the current
-- bucket's old meta (generations and n), if any.
--
-- Returns {score, rank, applied, subscores}: applied is 0 when the request id
-- was already used (nothing changes; score, rank and subscores are current, rank
-- 0 if the member is gone); subscores as stored (8 bytes each; '' if none).
-- A refusal is an error reply starting with "RANK_INVALID "; every check runs
-- before the first write, so a refused update changes nothing.
--
-- Try it: redis-cli EVAL "$(cat update.lua)" 6 'rk:{b}:z' 'rk:{b}:t' 'rk:{b}:q' \
--   'rk:{b}:d' 'rk:{b}:c' 'rk:{b}:a' alice 1 10 "$(printf '\0\0\0\0\0\1')" 3600000 \
--   fp01 request-1- 12345 1763800000000 1 desc ordinal 0 0 '' 0 0 '' \
--   1959777 1959776 1959775 1959774 1959773 1763803800000

local zkey, tkey, qprefix, dkey, ckey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local akey = KEYS[6]
local member, mode, value = ARGV[1], ARGV[2], tonumber(ARGV[3])
local time, window, fingerprint = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local idhash, selector, now = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local rank_wanted = ARGV[10] == '1'
local ascending, kind, cap = ARGV[11] == 'asc', ARGV[12], ARGV[13]
local expire_at = ARGV[14]
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

-- The buckets looked in, by name: names[0] the current one, names[i] the
-- one i before it.
local names = {[0] = ARGV[19], ARGV[20], ARGV[21], ARGV[22], ARGV[23]}
local record_expire_at = ARGV[24]
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

-- The fingerprint recorded for this request id in bucket names[i], whose
-- generations have s hashes, or nil. The newest generation first.
local function look(i, s)
  for g = #s, 1, -1 do
    local v = redis.call('HGET', record_hash(names[i], g - 1, s[g]), idhash)
    if v then
      return v
    end
  end
  return nil
end

-- The board's meta: since, the generations of the 5 buckets, the current
-- bucket's n.
local meta = redis.call('HMGET', qprefix, 'since', names[0], names[1],
  names[2], names[3], names[4], names[0] .. ':n')
local since = tonumber(meta[1])
local old_before = since or math.huge
-- The buckets found in the old layout: old[i] = {s = hash counts, n = records}.
local old = {}

-- The fingerprint recorded for this request id, or nil.
local function recorded()
  for i = 0, BUCKETS do
    local layout = meta[i + 2]
    if layout then
      local hashes, v = tonumber(layout) -- one generation: the usual case
      if hashes then
        local hash = record_hash(names[i], 0, hashes)
        if i == 0 then
          current_hash, current_layout = hash, layout
        end
        v = redis.call('HGET', hash, idhash)
      else
        v = look(i, generations_of(layout))
      end
      if v then
        return v
      end
    end
    if (current - i) * width < old_before then
      local m = redis.call('HMGET', qprefix .. ':' .. names[i],
        'g', 's0', 's1', 's2', 's3', 's4', 'n')
      local generations = tonumber(m[1])
      if generations then
        local s = {}
        for g = 1, generations do
          s[g] = tonumber(m[g + 1])
        end
        old[i] = {s = s, n = tonumber(m[7])}
        local v = look(i, s)
        if v then
          return v
        end
      end
    end
  end
  return nil
end

-- Records the request id in the current bucket (after recorded()).
local function record()
  local name = names[0]
  local layout, n = meta[2], tonumber(meta[7]) or 0
  local meta_expire_at
  if not layout then
    -- A new bucket (once per window/4). The meta of buckets out of the
    -- window goes, and of those more than 4 buckets ahead (another window
    -- length, a clock far off); the previous bucket's n sizes this one.
    local fields = redis.call('HGETALL', qprefix)
    local stale, newest, previous = {}, current, nil
    for j = 1, #fields, 2 do
      local f = fields[j]
      if f ~= 'since' then
        local k = tonumber(string.match(f, '^%-?%d+'))
        if not k or k < current - BUCKETS or k > current + BUCKETS then
          stale[#stale + 1] = f
        elseif k > newest then
          newest = k
        end
        if f == names[1] .. ':n' then
          previous = tonumber(fields[j + 1])
        end
      end
    end
    if #stale > 0 then
      redis.call('HDEL', qprefix, unpack(stale))
    end
    if old[0] then
      -- Records of this bucket in the old layout: go on with its generations.
      layout, n = table.concat(old[0].s, ','), old[0].n or 0
      old[0] = nil
    else
      -- Sized from the previous bucket.
      previous = previous or (old[1] and old[1].n) or 0
      local hashes = 1
      while hashes * PER_HASH < previous and hashes < MAX_HASHES do
        hashes = hashes * 2
      end
      layout = string.format('%d', hashes)
    end
    meta_expire_at = (newest + BUCKETS + 1) * width
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
  local set = {name .. ':n', n + 1}
  if layout ~= meta[2] then
    set[3], set[4] = name, layout
  end
  if not since then
    -- The meta hash's first record: buckets with records left in the old
    -- layout are looked up there until they are out of the window.
    since = 0
    for i = BUCKETS, 0, -1 do
      if old[i] then
        since = (current - i + 1) * width
      end
    end
    set[#set + 1] = 'since'
    set[#set + 1] = string.format('%d', since)
  end
  redis.call('HSET', qprefix, unpack(set))
  if meta_expire_at then
    redis.call('PEXPIREAT', qprefix, meta_expire_at)
  end
  local hash = current_hash
  if layout ~= current_layout then
    hash = record_hash(name, g - 1, hashes)
  end
  redis.call('HSET', hash, idhash, fingerprint)
  redis.call('PEXPIREAT', hash, record_expire_at)
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
  if key then
    redis.call('ZREM', zkey, key)
    redis.call('HDEL', tkey, member)
    redis.call('HDEL', akey, member)
    if kind == 'dense' then
      count_score(old, -1)
    end
  end
  record()
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
record()
return {new, ranked and rank_of(key, new) or 0, 1, ranked and new_subs or ''}
