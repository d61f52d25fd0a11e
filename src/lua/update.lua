-- update.lua: applies a batch of updates to one board (or to one shard of
-- it, in one period), in order, each at most once per request id.
--
-- rankd sends the updates of one board that are queued in the same loop
-- iteration as one call of this script: the cost of a call (the EVALSHA,
-- the meta of the request-id records, this file's own functions) is paid
-- once per batch; what is left per update is its own work. Each update is
-- checked and applied as if it came alone, in the batch's order, and
-- answered alone.
--
-- KEYS[1]  sorted set  rk:{board}:z    member = prefix .. member id, score = -score
-- KEYS[2]  hash        rk:{board}:t    member id -> its prefix: subscores (8 bytes
--                                      each, see orderkey.h), time (6 bytes, big-endian ms)
-- KEYS[3]  hash        rk:{board}:q    meta of the request-id records, and the
--                                      prefix of their hashes (see below)
-- KEYS[4]  sorted set  rk:{board}:d    distinct sorted-set scores (rank=dense only)
-- KEYS[5]  hash        rk:{board}:c    sorted-set score -> members with it (dense only)
-- KEYS[6]  hash        rk:{board}:a    member id -> its data (encoded by rankd)
--
-- ARGV, the batch's: the width of a request-id time bucket (ms, ceil(window /
--   4)); the buckets looked in: k, k-1, .., k-4 for the current bucket k =
--   floor(now / width); when bucket k's records expire ((k + 5) * width, Unix
--   ms); rank wanted (1, or 0 on a shard of a sharded board: the rank within
--   one shard means nothing, and the reply gives rank 0); order (desc: score
--   = -score; asc: score = score, BEST keeps the lower); rank kind (ordinal,
--   competition or dense); cap (0: none; else the shard keeps its best cap
--   members); expire at (Unix ms; periodic boards: when this period's keys
--   go; 0: never). Numbers rankd formats, as string.format here costs Redis
--   more.
-- Then each update's: member, mode (1 INCREMENT, 2 BEST, 3 SET, 4 remove),
--   value, time (6 bytes), fingerprint (4 bytes) of what the request id
--   stands for, request-id hash (10 bytes), request-id selector
--   (0..2^32-1), subscores (8 bytes each, encoded to sort bytewise; '' on
--   boards without), subscores absent (1: an INCREMENT without them keeps
--   the member's own; those given are then the 0s of a new member), data
--   given (1: replace the member's data with the next argument, which when
--   empty deletes it), data.
--
-- Request-id records are packed: a record is one field (the 10-byte hash of
-- the request id) -> value (the fingerprint) of a small hash. Time is cut
-- into buckets of window/4. Bucket k has record hashes
-- rk:{board}:q:<k>:<i>:<selector mod s_i> in generations i = 0, 1, ... (at
-- most 5). The board keeps the meta of all its buckets in one hash,
-- rk:{board}:q: field <k> lists the hash counts s_0,s_1,... of bucket k's
-- generations ("1,32"), field <k>:n counts its records. A bucket opens with
-- one generation sized from the previous bucket's n, about 32 records per
-- hash: small enough for Redis's compact listpack encoding at any steady
-- rate, and for a lookup that misses (it reads every entry) to stay cheap.
-- When a generation fills (48 per hash: a new board, a burst), the next
-- has 32 times the hashes. A request id is looked up in the 4 buckets before
-- the current one and in the current one's older generations (an HGET
-- each), then recorded in the current generation with HSETNX, which also
-- finds it there; so it is remembered for at least the window. Every record
-- hash of bucket k expires at the end of bucket k+4. Opening a bucket deletes
-- the meta fields of the buckets out of the window and has the meta hash
-- expire with the records of its newest bucket.
--
-- Returns one reply per update, in order: {score, rank, applied, subscores}:
-- applied is 0 when the request id was already used (nothing changes;
-- score, rank and subscores are current, rank 0 if the member is gone);
-- subscores as stored (8 bytes each; '' if none). A refusal is an error
-- reply starting with "RANK_INVALID "; a key of another type than rankd
-- keeps there (damaged data) is "RANK_DAMAGED ...", and stops the batch:
-- the updates after it answer "RANK_UNAVAILABLE ..." and change nothing.
-- Every check, and every command that can fail, runs before an update's
-- first write: a refused or failed update changes nothing and records
-- nothing.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua update.lua)" 6 'rk:{b}:z' 'rk:{b}:t' \
--   'rk:{b}:q' 'rk:{b}:d' 'rk:{b}:c' 'rk:{b}:a' 900000 \
--   2127555 2127554 2127553 2127552 2127551 1914804000000 1 desc ordinal 0 0 \
--   alice 1 10 "$(printf '\0\0\0\0\0\1')" fp01 request-1- 12345 '' 0 0 ''

local zkey, tkey, qprefix, dkey, ckey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local akey = KEYS[6]
-- The batch's arguments, one a line, in the order rankd gives them
-- (store_update.c, BatchArg; tests/test_requestid.c checks the two agree).
local width = ARGV[1]
-- The buckets looked in, by name: names[0] the current one, names[i] the
-- one i before it.
local names = {[0] = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]}
local record_expire_at = ARGV[7]
local rank_wanted = ARGV[8]
local order = ARGV[9]
local kind = ARGV[10]
local cap = ARGV[11]
local expire_at = ARGV[12]
-- Then ITEM arguments per update (store_update.c, ItemArg).
local HEAD, ITEM = 12, 11
-- The updates in this call.
local count = (#ARGV - HEAD) / ITEM

width = tonumber(width)
rank_wanted = rank_wanted == '1'
local ascending = order == 'asc'
local current = tonumber(names[0])
local LIMIT = 9007199254740991
local BUCKETS = 4          -- buckets per window
local PER_HASH = 32        -- records aimed at per record hash
local FULL_HASH = 48       -- records per hash that open a new generation
local MAX_HASHES = 1048576
local MAX_GENERATIONS = 5
local BURST_ITEMS = 32     -- updates in one call that make it a burst
local BURST_RECORDS = 1000 -- records a bucket opened by a burst is sized for, per update of the call

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

-- Generation numbers as strings: a number joined to a string is formatted
-- as a float, which costs Redis more than the lookup it names.
local GENERATION = {[0] = '0', '1', '2', '3', '4'}

local function record_hash(bucket, generation, hashes, selector)
  return qprefix .. ':' .. bucket .. ':' .. GENERATION[generation] .. ':' ..
    string.format('%d', selector % hashes)
end

-- The board's meta: the generations of the 5 buckets, the current bucket's n.
local meta = call_on(qprefix, 'hash', 'request-id meta', 'HMGET', names[0],
  names[1], names[2], names[3], names[4], names[0] .. ':n')
local older = {}
for i = 1, BUCKETS do
  older[i] = meta[i + 1] and generations_of(meta[i + 1])
end

-- The current bucket: its generations, its records (n), whether this batch
-- opened it, and the record hashes this batch wrote (their expiry is set
-- once, at the end).
local layout, n = meta[1], tonumber(meta[6]) or 0
local opened, stale, meta_expire_at = false, nil, nil
local gens = layout and generations_of(layout)
local written = {}
local records_added = 0

-- Opens the current bucket: the meta of buckets out of the window goes, and
-- of those more than 4 buckets ahead (another window length, a clock far
-- off); the previous bucket's n sizes this one.
local function open_bucket()
  local fields = call_on(qprefix, 'hash', 'request-id meta', 'HGETALL')
  local newest, previous = current, 0
  stale = {}
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
  local hashes = 1
  while hashes * PER_HASH < previous and hashes < MAX_HASHES do
    hashes = hashes * 2
  end
  -- A call of many updates is a burst (they come batched only under load):
  -- the bucket it opens is sized for BURST_RECORDS records per update of
  -- it, so that the burst does not fill small generation after generation,
  -- every one of which each later update looks in.
  if count >= BURST_ITEMS then
    while hashes * PER_HASH < count * BURST_RECORDS and hashes < MAX_HASHES do
      hashes = hashes * 2
    end
  end
  layout = string.format('%d', hashes)
  gens = {hashes}
  opened = true
  meta_expire_at = (newest + BUCKETS + 1) * width
end

-- The generation that takes the next record: the newest, after opening one
-- with 32 times the hashes when it is full (a new board, a burst). Earlier
-- generations closed exactly when full, so the newest one holds n minus
-- their capacity. Called before each lookup: a generation the lookup
-- passes over as the newest must be the one the record would go to.
local function newest_generation()
  if not gens then
    open_bucket()
  end
  local g = #gens
  local in_newest = n
  for i = 1, g - 1 do
    in_newest = in_newest - gens[i] * FULL_HASH
  end
  if in_newest >= gens[g] * FULL_HASH and g < MAX_GENERATIONS then
    g = g + 1
    gens[g] = math.min(gens[g - 1] * 32, MAX_HASHES)
    layout = layout .. ',' .. string.format('%d', gens[g])
  end
  return g
end

-- The record of idhash in bucket's generations s[from], s[from - 1], .. s[1].
local function recorded_in(bucket, s, from, idhash, selector)
  for g = from, 1, -1 do
    local hash = record_hash(bucket, g - 1, s[g], selector)
    local v = call_on(hash, 'hash', 'request-id records', 'HGET', idhash)
    if v then
      return v
    end
  end
  return nil
end

-- The fingerprint recorded for idhash before the current generation: in
-- the 4 buckets before, and the current bucket's older generations. The
-- newest generation of each first.
local function recorded_before(idhash, selector)
  for i = 1, BUCKETS do
    local s = older[i]
    local v = s and recorded_in(names[i], s, #s, idhash, selector)
    if v then
      return v
    end
  end
  return gens and recorded_in(names[0], gens, #gens - 1, idhash, selector)
end

-- The sorted-set score of a score, and back: sorted sets order ascending.
local function zscore_of(score)
  return ascending and score or -score
end

local function zformat(score)
  return string.format('%d', zscore_of(score))
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
  local c = redis.call('HINCRBY', ckey, zs, delta)
  if c <= 0 then
    redis.call('HDEL', ckey, zs)
    redis.call('ZREM', dkey, zs)
  elseif c == 1 and delta == 1 then
    redis.call('ZADD', dkey, zs, zs)
  end
end

-- Keys whose type this batch checked (no other client runs meanwhile, and
-- its own writes keep them).
local typed = {}

local function expect_once(key, want, what)
  if not typed[key] then
    expect(key, want, what)
    typed[key] = true
  end
end

local REUSED = 'RANK_INVALID request_id: already used on this board ' ..
  'for another member, value, mode, subscores or data'

-- Applies the update whose arguments follow ARGV[at].
local function apply(at)
  local member = ARGV[at + 1]
  local mode = ARGV[at + 2]
  local value = ARGV[at + 3]
  local time = ARGV[at + 4]
  local fingerprint = ARGV[at + 5]
  local idhash = ARGV[at + 6]
  local selector = ARGV[at + 7]
  local subs = ARGV[at + 8]
  local keep_subs = ARGV[at + 9]
  local data_given = ARGV[at + 10]
  local data = ARGV[at + 11]
  local nsub = #subs
  selector = tonumber(selector)
  data_given = data_given == '1'

  local newest = newest_generation()
  local seen = recorded_before(idhash, selector)

  -- The member's place: its sorted-set key, score and subscores.
  local key, old, old_subs
  local p = call_on(tkey, 'hash', 'member times', 'HGET', member)
  if p then
    key = p .. member
    old = zscore_of(tonumber(call_on(zkey, 'zset', 'scores', 'ZSCORE', key)))
    old_subs = string.sub(p, 1, nsub)
  end

  -- Before the first write: the keys this update writes that it has not
  -- read hold their types.
  if not key then
    expect_once(zkey, 'zset', 'scores')
  end
  if data_given or mode == '4' or cap ~= '0' then
    expect_once(akey, 'hash', 'member data')
  end
  if kind == 'dense' then
    expect_once(dkey, 'zset', 'distinct scores')
    expect_once(ckey, 'hash', 'members per score')
  end

  -- The first write: the record. HSETNX finds a record of this id in the
  -- current generation, and writes none then.
  local hash
  if not seen then
    hash = record_hash(names[0], newest - 1, gens[newest], selector)
    if call_on(hash, 'hash', 'request-id records', 'HSETNX', idhash,
        fingerprint) == 0 then
      seen = redis.call('HGET', hash, idhash)
      hash = nil
    end
  end
  if seen then
    if seen ~= fingerprint then
      return redis.error_reply(REUSED)
    end
    if not key then
      return {0, 0, 0, ''}
    end
    return {old, rank_of(key, old), 0, old_subs}
  end
  n = n + 1
  records_added = records_added + 1
  written[hash] = true

  -- Remove (mode 4, rankd's Remove): the member and its data go. Returns
  -- {the score it had, 1 if it was on the board, 1}.
  if mode == '4' then
    if key then
      redis.call('ZREM', zkey, key)
      redis.call('HDEL', tkey, member)
      redis.call('HDEL', akey, member)
      if kind == 'dense' then
        count_score(old, -1)
      end
    end
    return {old or 0, key and 1 or 0, 1, ''}
  end
  value = tonumber(value)
  if keep_subs == '1' and old_subs then
    subs = old_subs
  end
  local new, new_subs = old, old_subs
  if mode == '1' then
    new, new_subs = (old or 0) + value, subs
  elseif mode == '2' then
    -- BEST compares the whole (score, subscores) tuple and keeps one of the
    -- two.
    if old == nil or (ascending and value < old)
        or (not ascending and value > old)
        or (value == old and before(subs, old_subs)) then
      new, new_subs = value, subs
    end
  else
    new, new_subs = value, subs
  end
  -- Only an increment can leave the range (rankd checks value itself). The
  -- sum of two exact integers rounds past the limit if it is past it, so the
  -- test is exact; the message prints its operands, which are exact too.
  if new > LIMIT or new < -LIMIT then
    -- The record goes again: a refused update records nothing.
    redis.call('HDEL', hash, idhash)
    n = n - 1
    records_added = records_added - 1
    return redis.error_reply(string.format(
      'RANK_INVALID value: current score %d + %d is outside -%d..%d',
      old or 0, value, LIMIT, LIMIT))
  end

  -- An update that leaves the score (and subscores) as they were keeps the
  -- old time: whoever reached a score first stays ahead of those who reach
  -- it later.
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
  if new ~= old and kind == 'dense' then
    if old then
      count_score(old, -1)
    end
    count_score(new, 1)
  end
  -- A capped board keeps its best cap members: one more drops the worst,
  -- which ties lose to those who got there first. If that is this member,
  -- the update did not make the cut: applied, but not ranked.
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
  return {new, ranked and rank_of(key, new) or 0, 1, ranked and new_subs or ''}
end

local results = {}
local stopped
for i = 1, count do
  if stopped then
    results[i] = redis.error_reply('RANK_UNAVAILABLE not applied: ' .. stopped)
  else
    local ok, r = pcall(apply, HEAD + (i - 1) * ITEM)
    -- Redis 7's pcall hands an error table over as its message.
    if not ok and type(r) == 'table' then
      r = r.err
    end
    if ok then
      results[i] = r
    elseif string.sub(tostring(r), 1, 13) == 'RANK_DAMAGED ' then
      -- Damaged data: this update changed nothing; the batch stops here.
      results[i] = redis.error_reply(r)
      stopped = 'an update before it in the same batch met ' .. r
    else
      error({err = tostring(r)})
    end
  end
end

-- What the records of this batch leave in the meta hash, and the expiry of
-- the record hashes written and of a period's keys.
if records_added > 0 then
  if opened and #stale > 0 then
    redis.call('HDEL', qprefix, unpack(stale))
  end
  if layout ~= meta[1] then
    redis.call('HSET', qprefix, names[0] .. ':n', n, names[0], layout)
  else
    redis.call('HSET', qprefix, names[0] .. ':n', n)
  end
  if meta_expire_at then
    redis.call('PEXPIREAT', qprefix, meta_expire_at)
  end
  for hash in pairs(written) do
    redis.call('PEXPIREAT', hash, record_expire_at)
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
end
return results
