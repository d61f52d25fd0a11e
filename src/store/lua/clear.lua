-- clear.lua: removes one scope of a board in one step, for DeleteBoard and
-- ResetBoard (store_admin.c).
--
-- A scope is the keys one update.lua call may touch together: a board's
-- own keys under its tag (rk:{board}: or a shard's rk:s:{board/i}:), with
-- the request-id records of all its periods, or one period's entries
-- (rk:{board}:p:<label>:). Its sorted set, times hash, data hash and
-- dense counts (and the request-id meta, with the board's own keys) must
-- change together: were they removed by separate commands, an update
-- landing between them would leave the sorted set with entries whose
-- member has no times (a member listed twice by GetTopN, for good). So
-- they are named here, from the scope's prefix, and go in this one call,
-- which no update can interleave. The request-id record hashes
-- (prefix .. 'q:<s>:<i>'), which can be thousands, are not named here:
-- rankd removes them before this call (store_admin.c says why that order
-- is safe).
--
-- KEYS[1]  the scope's sorted set (prefix .. 'z'): routes the call; every
--          other key shares its hash tag
-- ARGV[1]  the scope's prefix, "rk:{board}:" or "rk:{board}:p:<label>:"
-- ARGV[2]  what goes: 'entries' (scores, times, data, dense counts, a
--          rolling window's state: a ResetBoard of the board's own keys,
--          which keeps its request-id records), 'period' (a period's entries), 'all' (entries, the
--          request-id meta, the stored layout and the update queue: a
--          DeleteBoard of the board's own keys)
-- ARGV[3], ARGV[4]  with 'period': the tag's registry of periods
--          ("rk:{board}:k") and the period's label, which leaves it with
--          the period's keys (a registry left empty is gone: Redis removes
--          an empty sorted set)
--
-- Returns the number of keys removed. Only ZREM can fail (a key of another
-- type where the registry should be): it runs first.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua clear.lua)" 1 'rk:{b}:z' 'rk:{b}:' all

local prefix, what = ARGV[1], ARGV[2]
local doomed = {prefix .. 'z', prefix .. 't', prefix .. 'a', prefix .. 'd',
  prefix .. 'c'}
if what ~= 'period' then
  -- A rolling window's state (window.lua); its keys are a period's.
  doomed[#doomed + 1] = prefix .. 'w'
end

if what == 'all' then
  doomed[#doomed + 1] = prefix .. 'q'
  doomed[#doomed + 1] = prefix .. 'o'
  doomed[#doomed + 1] = prefix .. 'u'
  doomed[#doomed + 1] = prefix .. 'v'
  doomed[#doomed + 1] = prefix .. 'n'
end

if what == 'period' then
  call_on(ARGV[3], 'zset', 'periods', 'ZREM', ARGV[4])
end
-- UNLINK frees a large value in a background thread.
return redis.call('UNLINK', unpack(doomed))
