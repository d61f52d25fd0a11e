-- data.lua: a member's data (display name, country...), set or read only
-- while the member is on the board.
--
-- KEYS[1]  hash  rk:{board}:t  member id -> its prefix (is it on the board?)
-- KEYS[2]  hash  rk:{board}:a  member id -> its data (encoded by rankd)
-- ARGV     'set' or 'get', member id, [set: the data; empty deletes it]
--
-- Returns false if the member is not on the board; else set: 1 (the data
-- hash takes the expiry of the times hash: a period's data goes with it);
-- get: the data, or '' if it has none.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua data.lua)" 2 'rk:{b}:t' 'rk:{b}:a' get alice

local tkey, akey = KEYS[1], KEYS[2]
local op, member = ARGV[1], ARGV[2]

if call_on(tkey, 'hash', 'member times', 'HEXISTS', member) == 0 then
  return false
end
if op == 'get' then
  return call_on(akey, 'hash', 'member data', 'HGET', member) or ''
end
-- The only write that can fail, and the first.
if ARGV[3] == '' then
  call_on(akey, 'hash', 'member data', 'HDEL', member)
else
  call_on(akey, 'hash', 'member data', 'HSET', member, ARGV[3])
  local ttl = redis.call('PTTL', tkey)
  if ttl > 0 then
    redis.call('PEXPIRE', akey, ttl)
  end
end
return 1
