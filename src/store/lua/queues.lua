-- queues.lua: the list of boards whose queue has work, rk:queues
-- (queue_store_index.c). The drains read only the boards listed there, so a queue
-- with nothing in it costs Redis nothing.
--
-- A board's score is when work was last added (Redis's clock, Unix ms), and
-- every 'join' raises it, even within one millisecond: a drain that saw
-- score s, then found every stream of the board empty, takes the board off
-- with 'leave' only if the score is still s. An Enqueue joins after its
-- entries are in the streams, so it either came before the drain's look
-- (the drain saw its entries) or moved the score (the board stays), and no
-- entry waits in a stream whose board is not listed. The streams live
-- under their boards' hash tags, not with this key: two scripts, not one.
--
-- KEYS[1]  sorted set  rk:queues
-- ARGV[1]  'join':  board. Returns its new score.
--          'leave': board, the score the drain read. Returns 1 if the
--                   board left, 0 if work was added since.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua queues.lua)" 1 rk:queues \
--   join b

local qkey, op, board = KEYS[1], ARGV[1], ARGV[2]

-- Before the first write: rk:queues is a sorted set.
local old = call_on(qkey, 'zset', 'queues with work', 'ZSCORE', board)

if op == 'join' then
  local t = redis.call('TIME')
  local score = t[1] * 1000 + math.floor(t[2] / 1000)
  if old and tonumber(old) >= score then
    score = tonumber(old) + 1
  end
  redis.call('ZADD', qkey, score, board)
  return score
end

if op == 'leave' then
  -- Scores are whole milliseconds: compared as numbers, not as text.
  if old and tonumber(old) == tonumber(ARGV[3]) then
    redis.call('ZREM', qkey, board)
    return 1
  end
  return 0
end

return redis.error_reply('ERR queues.lua: unknown operation ' .. tostring(op))
