-- clear.lua: removes one scope of a board in one step, for DeleteBoard and
-- ResetBoard (store_admin.c).
--
-- A scope is the keys one update.lua call may touch together: a board's
-- own keys under its tag (rk:{board}: or a shard's rk:s:{board/i}:), or
-- one period's (rk:{board}:p:<label>:). Its sorted set, times hash, data
-- hash, dense counts and request-id meta must change together: were they
-- removed by separate commands, an update landing between them would leave
-- the sorted set with entries whose member has no times (a member listed
-- twice by GetTopN, for good). So they are named here, from the scope's
-- prefix, and go in this one call, which no update can interleave. The
-- request-id record hashes (prefix .. 'q:<s>:<i>'), which can be
-- thousands, are not named here: rankd removes them before this call, as
-- it finds them (store_admin.c says why that order is safe).
--
-- KEYS[1]  the scope's sorted set (prefix .. 'z'): routes the call; every
--          other key shares its hash tag
-- ARGV[1]  the scope's prefix, "rk:{board}:" or "rk:{board}:p:<label>:"
-- ARGV[2]  what goes: 'entries' (scores, times, data, dense counts: a
--          ResetBoard of the board's own keys, which keeps its request-id
--          records), 'period' (entries and the request-id meta: a period's scope),
--          'all' (entries, the meta, the stored layout and the update queue:
--          a DeleteBoard of the board's own keys)
--
-- Returns the number of keys removed. UNLINK is its only command: it
-- removes a key of any type, and cannot fail half way.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua clear.lua)" 1 'rk:{b}:z' 'rk:{b}:' all

local prefix, what = ARGV[1], ARGV[2]
local doomed = {prefix .. 'z', prefix .. 't', prefix .. 'a', prefix .. 'd',
  prefix .. 'c'}

if what ~= 'entries' then
  doomed[#doomed + 1] = prefix .. 'q'
end
if what == 'all' then
  doomed[#doomed + 1] = prefix .. 'o'
  doomed[#doomed + 1] = prefix .. 'u'
  doomed[#doomed + 1] = prefix .. 'v'
  doomed[#doomed + 1] = prefix .. 'n'
end

-- UNLINK frees a large value in a background thread.
return redis.call('UNLINK', unpack(doomed))
