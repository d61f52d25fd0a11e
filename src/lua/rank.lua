-- rank.lua: a member's score and 1-based rank, or nil if it is not on the board.
--
-- KEYS[1]  sorted set  rk:{board}:z
-- KEYS[2]  hash        rk:{board}:t
-- ARGV[1]  member id

local p = redis.call('HGET', KEYS[2], ARGV[1])
if not p then
  return false
end
local key = p .. ARGV[1]
return {-tonumber(redis.call('ZSCORE', KEYS[1], key)), redis.call('ZRANK', KEYS[1], key) + 1}
