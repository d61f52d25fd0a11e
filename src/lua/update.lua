-- update.lua: applies one score update to a board, at most once per request id.
--
-- KEYS[1]  sorted set  rk:{board}:z    member = time prefix .. member id, score = -score
-- KEYS[2]  hash        rk:{board}:t    member id -> its time prefix (6 bytes, big-endian ms)
-- KEYS[3]  string      rk:{board}:q:<request id> -> fingerprint; expires after the window
-- ARGV     member, mode (1 INCREMENT, 2 BEST, 3 SET), value, time prefix,
--          window (ms), fingerprint of (member, mode, value)
--
-- Returns {score, rank, applied}: applied is 0 when the request id was already
-- used (nothing changes; score and rank are current, rank 0 if the member is gone).
-- A refusal is an error reply starting with "RANK_INVALID "; every check runs
-- before the first write, so a refused update changes nothing.
--
-- Try it: redis-cli EVAL "$(cat update.lua)" 3 'rk:{b}:z' 'rk:{b}:t' 'rk:{b}:q:r1' \
--           alice 1 10 "$(printf '\0\0\0\0\0\1')" 3600000 fp1

local zkey, tkey, qkey = KEYS[1], KEYS[2], KEYS[3]
local member, mode, value = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local prefix, window, fingerprint = ARGV[4], ARGV[5], ARGV[6]
local LIMIT = 9007199254740991

-- The member's sorted-set key and score, or nil if it is not on the board.
local function place()
  local p = redis.call('HGET', tkey, member)
  if not p then
    return nil
  end
  local key = p .. member
  return key, -tonumber(redis.call('ZSCORE', zkey, key))
end

local seen = redis.call('GET', qkey)
if seen then
  if seen ~= fingerprint then
    return redis.error_reply('RANK_INVALID request_id: already used on this board ' ..
      'for another member, value or mode')
  end
  local key, score = place()
  if not key then
    return {0, 0, 0}
  end
  return {score, redis.call('ZRANK', zkey, key) + 1, 0}
end

local key, old = place()
local new = old
if mode == 1 then
  new = (old or 0) + value
elseif mode == 2 then
  if old == nil or value > old then
    new = value
  end
else
  new = value
end
-- Only an increment can leave the range (rankd checks value itself). The sum
-- of two exact integers rounds past the limit if it is past it, so the test
-- is exact; the message prints its operands, which are exact too.
if new > LIMIT or new < -LIMIT then
  return redis.error_reply(string.format(
    'RANK_INVALID value: current score %d + %d is outside -%d..%d',
    old or 0, value, LIMIT, LIMIT))
end

-- An update that leaves the score as it was keeps the old time: whoever
-- reached a score first stays ahead of those who reach it later.
if new ~= old then
  if key then
    redis.call('ZREM', zkey, key)
  end
  key = prefix .. member
  redis.call('ZADD', zkey, string.format('%d', -new), key)
  redis.call('HSET', tkey, member, prefix)
end
redis.call('SET', qkey, fingerprint, 'PX', window)
return {new, redis.call('ZRANK', zkey, key) + 1, 1}
