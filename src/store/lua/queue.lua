-- queue.lua: the update queue's writes that go with a count (queue_store.c).
--
-- A stream entry holds the updates of one Enqueue call to one shard: its
-- fields are n (how many) and p (the updates, packed by rankd, see
-- queue_store_entries.c). The counts hash keeps, in updates: queued (put in the
-- stream), delivered (read by a drain for the first time), applied,
-- replayed (a request id applied before: a repeated id counts once in
-- applied) and dead (their entry acknowledged). So the backlog is queued -
-- applied - replayed - dead and the pending ones delivered - applied -
-- replayed - dead, whatever the size of the entries; each count moves in
-- the same script as the stream.
--
-- KEYS[1]  stream  rk:{board}:u  the queue
-- KEYS[2]  hash    rk:{board}:n  its counts
-- KEYS[3]  stream  rk:{board}:v  its dead letters ('ack' only)
-- ARGV[1]  'add':  n, the packed updates. Returns the entry's id.
--          'read': group, consumer, count (entries). XREADGROUP of
--                  entries no consumer has read; returns its reply.
--          'ack':  group, then per entry its id, its counts ('applied
--                  replayed dead', decimal), letters.
--                  XACK of each; only those it acknowledges are counted
--                  and write their dead letters (an entry two drains
--                  handled, one after a claim, counts once and has its
--                  letters once). letters: the entry's dead updates,
--                  packed by rankd (queue_store_entries.c): per update its
--                  reason, member, request id, value, mode and time, each
--                  a 4-byte big-endian length, then its bytes. Returns the
--                  updates counted.
--          'idle': group. 1 if the stream holds nothing to apply: no
--                  entry undelivered, none pending (a drain's, or a dead
--                  drain's to claim); it is then emptied of the
--                  acknowledged entries. 0 otherwise. Read in one script,
--                  so no entry is between the two looks.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua queue.lua)" 2 'rk:{b}:u' \
--   'rk:{b}:n' add 1 x

local ukey, nkey = KEYS[1], KEYS[2]
local op = ARGV[1]

-- Before the first write: the counts are a hash, and the count to add to
-- is a number (or absent).
local function counts_checked(field)
  local v = call_on(nkey, 'hash', 'queue counts', 'HGET', field)
  if v and not tonumber(v) then
    damaged(nkey, 'hash with ' .. field .. ' = ' .. v, 'hash', 'queue counts')
  end
end

if op == 'add' then
  counts_checked('queued')
  local id = call_on(ukey, 'stream', 'update queue', 'XADD', '*', 'n', ARGV[2],
    'p', ARGV[3])
  redis.call('HINCRBY', nkey, 'queued', ARGV[2])
  return id
end

if op == 'read' then
  counts_checked('delivered')
  local r = redis.pcall('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT',
    ARGV[4], 'STREAMS', ukey, '>')
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 9) == 'WRONGTYPE' then
      damaged(ukey, redis.call('TYPE', ukey).ok, 'stream', 'update queue')
    end
    -- NOGROUP: rankd creates the group and reads again.
    return redis.error_reply(r.err)
  end
  if not r then
    return false
  end
  local n = 0
  for _, e in ipairs(r[1][2]) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'n' then
        n = n + (tonumber(f[i + 1]) or 0)
      end
    end
  end
  if n > 0 then
    redis.call('HINCRBY', nkey, 'delivered', n)
  end
  return r
end

-- The fields of a dead letter after its entry's id (the first one, reason,
-- goes before it), in the order they are packed.
local LETTER = {'m', 'r', 'v', 'o', 't'}

-- Writes the dead letters packed in letters, of the entry id.
local function dead_letters(vkey, id, letters)
  local at = 1
  while at <= #letters do
    local f = {}
    for j = 1, #LETTER + 1 do
      local a, b, c, d = string.byte(letters, at, at + 3)
      local n = ((a * 256 + b) * 256 + c) * 256 + d
      f[j] = string.sub(letters, at + 4, at + 3 + n)
      at = at + 4 + n
    end
    local args = {'reason', f[1], 'id', id}
    for j, name in ipairs(LETTER) do
      args[#args + 1] = name
      args[#args + 1] = f[j + 1]
    end
    redis.call('XADD', vkey, '*', unpack(args))
  end
end

if op == 'ack' then
  local vkey = KEYS[3]
  counts_checked('applied')
  counts_checked('replayed')
  counts_checked('dead')
  expect(ukey, 'stream', 'update queue')
  expect(vkey, 'stream', 'dead letters')
  for i = 4, #ARGV, 3 do
    if not string.match(ARGV[i], '^%d+ %d+ %d+$') then
      return redis.error_reply('ERR queue.lua: counts ' .. ARGV[i])
    end
  end
  local total = {applied = 0, replayed = 0, dead = 0}
  for i = 3, #ARGV, 3 do
    if redis.call('XACK', ukey, ARGV[2], ARGV[i]) == 1 then
      local a, r, d = string.match(ARGV[i + 1], '^(%d+) (%d+) (%d+)$')
      total.applied = total.applied + tonumber(a)
      total.replayed = total.replayed + tonumber(r)
      total.dead = total.dead + tonumber(d)
      dead_letters(vkey, ARGV[i], ARGV[i + 2])
    end
  end
  for field, n in pairs(total) do
    if n > 0 then
      redis.call('HINCRBY', nkey, field, n)
    end
  end
  return total.applied + total.replayed + total.dead
end

if op == 'idle' then
  local found = redis.call('TYPE', ukey).ok
  if found == 'none' then
    return 1
  end
  if found ~= 'stream' then
    damaged(ukey, found, 'stream', 'update queue')
  end
  local last
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', ukey)) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == ARGV[2] then
      if f['pending'] > 0 then
        return 0
      end
      last = f['last-delivered-id']
    end
  end
  -- Without the group nothing was ever delivered: every entry waits.
  local after = last and ('(' .. last) or '-'
  if #redis.call('XRANGE', ukey, after, '+', 'COUNT', 1) > 0 then
    return 0
  end
  -- Every entry is acknowledged: none is needed any more.
  redis.call('XTRIM', ukey, 'MAXLEN', 0)
  return 1
end

return redis.error_reply('ERR queue.lua: unknown operation ' .. tostring(op))
