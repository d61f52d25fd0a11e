-- export.lua: one page of Export (store_admin.c), read in one step.
--
-- The page walks the board's times hash (member id -> its prefix) with
-- HSCAN, not its sorted set with ZSCAN: an update moves a member's entry to
-- a new order key (prefix .. member id) in the sorted set, which ZSCAN may
-- then never return (a 50,000-member export under updates lost 1,011
-- members), while the member's field in the times hash stays where it is.
-- SCAN returns every field present from the first call to the last, so
-- every member on the board for the whole export is in some page. Each
-- member's entry is read here, in the same call as its field: a page is one
-- moment of the board, and a member updated during the export comes with
-- the score it had when its page was read.
--
-- KEYS[1]  hash        rk:{board}:t  member id -> its prefix, then what
--                                     update.lua keeps after it
-- KEYS[2]  sorted set  rk:{board}:z  order key (prefix .. member id) -> score
-- KEYS[3]  hash        rk:{board}:a  member id -> its data
-- ARGV     HSCAN's cursor, its COUNT, and the length of a prefix
--          (subscores and time: orderkey.h)
--
-- Returns HSCAN's next cursor, then as ZSCAN gives them the order keys and
-- their sorted-set scores, flat, then each member's data ('' if none), in
-- the same order.
--
-- Try it: redis-cli EVAL "$(cat prelude.lua export.lua)" 3 'rk:{b}:t' \
--   'rk:{b}:z' 'rk:{b}:a' 0 1000 6

local tkey, zkey, akey = KEYS[1], KEYS[2], KEYS[3]
local page = call_on(tkey, 'hash', 'member times', 'HSCAN', ARGV[1], 'COUNT',
  ARGV[2])
local fields, plen = page[2], tonumber(ARGV[3])
local entries, members = {}, {}

for i = 1, #fields, 2 do
  local key = sub(fields[i + 1], 1, plen) .. fields[i]
  local score = call_on(zkey, 'zset', 'scores', 'ZSCORE', key)
  -- A field without its entry (damaged data) is left out.
  if score then
    entries[#entries + 1] = key
    entries[#entries + 1] = score
    members[#members + 1] = fields[i]
  end
end
-- HMGET in runs: unpack has a limit, and a small hash (listpack) comes
-- whole whatever COUNT says.
local data = {}
for first = 1, #members, 500 do
  local got = call_on(akey, 'hash', 'member data', 'HMGET',
    unpack(members, first, math.min(first + 499, #members)))
  for i = 1, #got do
    data[#data + 1] = got[i] or ''
  end
end
return {page[1], entries, data}
