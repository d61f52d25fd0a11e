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
-- ARGV, the batch's: the request-id time buckets of the window, k, k-1, ..,
--   k-4 for the current bucket k = floor(now / ceil(window / 4)); when a
--   record hash marked in bucket k expires ((k + 6) * ceil(window / 4),
--   Unix ms); the answer wanted (rank: each update's score, rank,
--   applied and subscores; score: the same with rank 0, on a shard of a
--   sharded board, where the rank within one shard means nothing, or for a
--   caller that reads none; applied: whether each applied, alone, for a
--   caller that reads nothing else, the queue's drain); order
--   (desc: score = -score; asc: score = score, BEST keeps the lower); rank
--   kind (ordinal, competition or dense); cap (0: none; else the shard
--   keeps its best cap members); expire at (Unix ms; periodic boards: when
--   this period's keys go; 0: never); group ('', or the record of a batch
--   recorded as a whole, below); the board's rolling window ('': none;
--   sum or best: window.lua). Numbers rankd formats, as string.format
--   here costs Redis more.
-- Then each update's two (a batch of sets has one for all: below; an
--   argument costs Redis about 1.2k instructions: its parse, its object,
--   its Lua string): its member; and what, 6 bytes then the
--   rest: mode (1 INCREMENT, 2 BEST, 3 SET, 4 remove), subscores absent (1:
--   an INCREMENT without them keeps the member's own; those given are then
--   the 0s of a new member), data given (1: replace the member's data with
--   the rest of what, which when empty deletes it), and the lengths of the
--   id, prefix and value that follow; id, 14 bytes (none in a batch
--   recorded as a whole): the request-id record (4 bytes: the bucket mod
--   16, then 28 bits of the fingerprint of what the request id stands
--   for), then the request-id hash (10 bytes); prefix: the subscores (8
--   bytes each, encoded to sort bytewise; none on boards without) and the
--   time (6 bytes), the order key's prefix as the update gives it; value,
--   8 bytes, big-endian (struct's '>i8': one C call gives the number,
--   where a string.sub and a tonumber of its text cost two); data.
--
-- Request-id records are packed: a record is one field (the 10-byte hash of
-- the request id) -> value (4 bytes: the time bucket it was written in,
-- mod 16, in the top 4 bits, then 28 bits of the fingerprint) of a small
-- hash. The record hashes of a board form one layout of s hashes (a power
-- of 2), named
-- rk:{board}:q:<s>:<selector mod s>; the selector is the first 4 bytes of
-- the field, big-endian, so a record can be moved to another layout. A
-- request id has one place, whatever its age: HSETNX there finds a record
-- of it or writes one, reading the hash once. A record is live
-- while its bucket is the current one or one of the 4 before it (time is
-- cut into buckets of window/4), so an id is remembered for at least the
-- window and at most 1.25 windows; an older record counts as absent. (A
-- record up to 2 buckets ahead is live too: a retry that reaches a rankd
-- whose clock is behind the first one's, across a bucket's start, is still
-- recognised. No record is kept 12 buckets, so mod 16 is unambiguous.)
--
-- Stale records are swept lazily. A record hash's expiry is its mark: a
-- hash created or last swept in bucket k expires at the end of bucket k+5,
-- after every record in it stops being live, so that an idle board's
-- records all go, with no cleanup job. PEXPIRETIME reads it before the
-- record is written (no field of the hash: an HGET of a mark field read
-- the listpack up to it, and the field took memory in every hash). A
-- write to a hash whose expiry ends before bucket k+5 (swept 2 or more
-- buckets ago, or with no expiry at all) deletes the hash's stale records,
-- then sets it to expire at the end of bucket k+5 afresh. The record
-- written before the checks of its update is deleted again if the update
-- is refused.
--
-- The meta hash rk:{board}:q holds s, the records written in each bucket of
-- the window (field <k>) and, while the layout changes, the layout being
-- left (o) and how many of its hashes have been moved (m). s is chosen for
-- about 32 live records a hash: small enough for Redis's compact listpack
-- encoding, and for a lookup that misses (it reads every entry) to stay
-- cheap. A new board's layout is sized for its first call. When the live
-- records pass 48 a hash, the layout grows to at least twice the hashes;
-- when they fall under 16 a hash, it shrinks to 32 a hash. Each call
-- then moves at least 8 of the old layout's hashes (one per update of it)
-- into the new one, before its own lookups (move_share: a growth splits
-- each hash, a RENAME and the records bound elsewhere). Until its hash
-- moves, an id's record is in the old layout's hash, and a new record is
-- written there: a record is in one hash, and a lookup reads one.
-- The first records of a bucket delete the meta fields of buckets out of
-- the window and set the meta hash to expire with the newest record hash.
--
-- A batch recorded as a whole (UpdateBatchRequest.request_id; group, 24
-- bytes: its record (4 bytes) and field (10), as an update's, then how
-- many updates it has (1 byte), a token of the call (8) that keeps
-- rankd from putting another batch's updates in the same call, and 1 if
-- each update SETs a member of its own (sets, below), else 0) has one
-- record for all its updates, whose own ids are not looked up or recorded
-- (their ids are empty). rankd sends it alone in its call, and
-- only where the call is deferred (below): it applies all or nothing. A
-- live record of it answers each update as already applied (or, for
-- another batch, refuses each); else the record is written, and a refused
-- update leaves every update unapplied and deletes it again.
--
-- Returns the replies of the updates one after another, flat: for each,
-- score, rank, applied, subscores (4 elements), or its one error reply;
-- with the answer 'applied', applied alone (1 element; a batch recorded
-- as a whole answers in full).
-- (A table per update would cost Redis more: each is checked for the
-- fields of an error, a status and the RESP3 types.) Applied is 0 when
-- the request id was already used (nothing changes; score, rank and
-- subscores are current, rank 0 if the member is gone);
-- subscores as stored (8 bytes each; '' if none). A batch recorded as a
-- whole whose updates all SET members of their own, once applied,
-- returns just the number of its updates instead (sets, below). A refusal is an error
-- reply starting with "RANK_INVALID "; a key of another type than rankd
-- keeps there (damaged data) is "RANK_DAMAGED ...", and stops the batch:
-- the updates after it answer "RANK_UNAVAILABLE ..." and change nothing.
-- Every check, and every command that can fail, runs before an update's
-- first write: a refused or failed update changes nothing and records
-- nothing.
--
-- Try it: load it as a library (the build names it after its text; any
-- name does), then call it:
--   (printf '#!lua name=try\nlocal FUNCTION_NAME = "try_update"\n'; \
--    cat prelude.lua update.lua window.lua) | sed 's/^local sub, byte = .*/local sub, byte/' |
--     redis-cli -x FUNCTION LOAD
--   printf '\1\1\1\16\6\10fp01request-1-\1\2\3\4\5\6\0\0\0\0\0\0\0\12' |
--   redis-cli -x FCALL try_update 6 'rk:{b}:z' 'rk:{b}:t' \
--   'rk:{b}:q' 'rk:{b}:d' 'rk:{b}:c' 'rk:{b}:a' \
--   2127555 2127554 2127553 2127552 2127551 1914804900000 1 desc ordinal 0 0 \
--   '' '' alice
-- (-x: the last argument from the pipe, which keeps NUL bytes; 1 1 1 is an
-- INCREMENT without subscores whose data, given empty, is deleted; 14, 6
-- and 8 the lengths of its id, prefix and value 10)
--
-- A function library, not an EVAL script. An EVAL script's body runs
-- whole at every call: this file's 34 local functions were made again
-- each time, with their upvalues and the garbage they leave, ~114k of the
-- ~302k instructions Redis ran for a call of one update (callgrind;
-- bench/README.md of 4968f11, "update.lua as a function"). A library's top level runs
-- once, when it loads (FUNCTION LOAD): the functions below are made then,
-- and a call (FCALL) runs only the function registered at the end. So
-- what a call sets is declared here, at the top, and assigned at the
-- call's start by its lines "x = ..."; constants are the library's. While
-- a library loads, Redis lets it read only its redis API (no string,
-- math, ...): the build turns prelude.lua's `local sub, byte =
-- string.sub, string.byte` into `local sub, byte`, which each call sets,
-- and gives FUNCTION_NAME (src/store/embed.cmake).
--
-- Why the call's state is the library's locals (about 60, below), not one
-- table made per call and passed along: a local of the enclosing chunk is
-- an upvalue, read and written by one VM instruction (GETUPVAL/SETUPVAL),
-- where a field of a table is a hash lookup of its name at each use, in
-- the per-update paths that run most. The cost is Lua 5.1's limit of 60
-- upvalues a function: the call's work is split in functions
-- (open_call, prepare_call, apply_call) that each name fewer. A call
-- assigns them at its start, as said above, before it reads them; Redis
-- runs one call at a time. Not measured against a table: kept as is.

local KEYS, ARGV
-- The globals the functions below call for every update, as the library's
-- locals: a global costs two table lookups at each use (the function
-- environment's, then its __index's). Set at each call, as sub and byte:
-- while a library loads it may read only the redis API.
local function builtins()
  return redis.call, redis.error_reply, tonumber, string.format, math.floor,
    struct.pack, struct.unpack, unpack, pcall, type
end
local call, error_reply, tonumber, format, floor, spack, sunpack, unpack,
  pcall, type
-- What each call sets (the call's arguments, the board's meta, the
-- batch's tables and replies), assigned at its start: see above.
local zkey, tkey, qprefix, dkey, ckey, akey, names, record_expire_at,
  rank_wanted, applied_only, order, kind, cap, expire_at, group, grouped,
  sets, count, PREFIX_LEN, ascending, current, epoch, meta,
  hashes_s, leaving_s,
  hashes, leaving, migrated, n, live, opened, layout_changed, records_added,
  current_base, leaving_base, touch_key, touch_want, touch_what, typed,
  deferred, prefix_of, zscore_of_member, moved_members, was_prefix, data_members,
  data_of, swept_after, results, out, as_sent, set_members, set_hset, set_zadd, set_aset,
  set_adel, sets_with_data, set_prefix, set_zscore, set_found, stopped
-- Rolling windows: window.lua, which the build appends to this file,
-- assigns these; wcombine is the batch's argument ('' without a window,
-- else sum or best), window_on whether this call's period is in one.
local wcombine, window_on, window_open, window_apply, window_removed,
  window_all, window_flush
-- HEAD arguments of the batch (open_call), then PER_UPDATE arguments of
-- each update (store_update.c, UpdateArg); in a batch of sets (below),
-- one argument holding all of its updates.
local HEAD, PER_UPDATE = 13, 2
local TIME_BYTES = 6
local LIMIT = 9007199254740991
local BUCKETS = 4          -- buckets a record stays live after its own
local PER_HASH = 32        -- live records aimed at per record hash
local FULL_HASH = 48       -- live records per hash that grow the layout
local GROWTH = 2           -- how many times the hashes a layout grows to (at least)
local LOW_HASH = 16        -- live records per hash under which the layout shrinks
local MAX_HASHES = 1048576
local MIGRATE_MIN = 8      -- hashes of the layout left that a call moves, at least
local AHEAD = 2            -- buckets ahead a record still counts

-- A record that is live (its bucket is the current one or one of the
-- BUCKETS before it; or one of the AHEAD after it, written by a rankd whose
-- clock is ahead of this one's), or nil.
local function live_record(value)
  if value then
    local age = (epoch - floor(byte(value, 1) / 16)) % 16
    if age <= BUCKETS or age >= 16 - AHEAD then
      return value
    end
  end
  return nil
end

-- Whether two records stand for the same request: the same fingerprint
-- bits, whatever their buckets.
local function same_request(a, b)
  return byte(a, 1) % 16 == byte(b, 1) % 16
    and sub(a, 2) == sub(b, 2)
end

-- The smallest power of 2 hashes that holds records at PER_HASH each.
local function hashes_for(records)
  local h = 1
  while h * PER_HASH < records and h < MAX_HASHES do
    h = h * 2
  end
  return h
end

-- A request id's selector: the first 4 bytes of its field, big-endian, of
-- which a layout (at most 2^20 hashes) uses the low 3 only.
local function selector_of(field)
  local b, c, d = byte(field, 2, 4)
  return (b * 256 + c) * 256 + d
end

-- The names of a layout's hashes start with its base (layout_base); the
-- bases of the current layout and the one being left are made once a call.
local function layout_base(size_s)
  return size_s and qprefix .. ':' .. size_s .. ':'
end

-- The name of a request id's hash in a layout of size hashes: its base,
-- then the hash's number. Made anew at each use, in one string (format
-- writes both parts into one buffer, where a concatenation after it would
-- make a second string). The numbers are not kept from call to call: the
-- library kept up to 65,536 of them once, which saved about 1.4k
-- instructions an update but made every garbage collection of the Lua heap
-- walk them, one cache miss each, and cost more time than it saved
-- (bench/README.md of 4968f11, "What the Lua heap costs").
local function record_hash(base, size, selector)
  return format('%s%d', base, selector % size)
end

local function wrongtype_named(err)
  if touch_key and string.find(tostring(err), 'WRONGTYPE', 1, true) then
    return damaged_text(touch_key, call('TYPE', touch_key).ok,
      touch_want, touch_what)
  end
  return err
end

-- A request id's hash, and that hash's mark (its expiry, Unix ms; -1:
-- none; -2: no such hash): in the current layout, or, if its hash in the
-- layout being left has not moved yet, that one. A record is in one hash,
-- whatever the layout: one written while its hash waits to move is
-- written there, and moves with it. (PEXPIRETIME reads any type: the
-- hash's is checked by the HSETNX that writes the record.)
-- (selector_of and record_hash written out: a Lua function call costs
-- Redis about 0.2k instructions, and this runs for every update.)
local function lookup(idhash)
  local b, c, d = byte(idhash, 2, 4)
  local selector = (b * 256 + c) * 256 + d
  local hash
  if leaving and selector % leaving >= migrated then
    hash = format('%s%d', leaving_base, selector % leaving)
  else
    hash = format('%s%d', current_base, selector % hashes)
  end
  return hash, call('PEXPIRETIME', hash)
end

-- After HSETNX found a record of idhash in hash: that record if it is
-- live (nothing is written then), else nil, and the stale record is
-- overwritten with this one (value).
local function found_record(hash, idhash, value)
  local seen = live_record(call('HGET', hash, idhash))
  if not seen then
    call('HSET', hash, idhash, value)
  end
  return seen
end

-- Records idhash in hash (its value: this update's record) unless the hash
-- holds a live record of it already: then returns that record and writes
-- nothing. HSETNX looks and writes at once (a lookup that misses reads the
-- whole hash: once is enough). (apply writes this out.)
local function write_record(hash, idhash, value)
  touch_key, touch_want, touch_what = hash, 'hash', 'request-id records'
  if call('HSETNX', hash, idhash, value) == 1 then
    return nil
  end
  return found_record(hash, idhash, value)
end

-- A hash whose mark is older than swept_after, after a record was written
-- to it: a hash that is new (mark -2) is set to expire; one swept 2
-- buckets ago or more (or without an expiry, -1) loses its stale records
-- first.
local function sweep(hash, mark)
  if mark ~= -2 then
    local all = call('HGETALL', hash)
    local stale = {}
    for i = 1, #all, 2 do
      if not live_record(all[i + 1]) then
        stale[#stale + 1] = all[i]
      end
    end
    if #stale > 0 then
      call('HDEL', hash, unpack(stale))
    end
  end
  call('PEXPIREAT', hash, record_expire_at)
end

-- After a record is written to hash (whose mark was mark). Hashes marked
-- in the current bucket or the one before (or ahead, by a rankd whose
-- clock is ahead of this one's) need no sweep.
local function recorded(hash, mark)
  if hash then
    records_added = records_added + 1
    if mark < swept_after then
      sweep(hash, mark)
    end
  end
end

-- The sorted-set score of a score, and back: sorted sets order ascending.
local function zscore_of(score)
  return ascending and score or -score
end

local function zformat(score)
  return format('%d', zscore_of(score))
end

-- The member's rank (key, score): ordinal 1,2,3,4; competition 1,2,2,4 (1 +
-- those with a better score); dense 1,2,2,3 (1 + the better scores).
local function rank_of(key, score)
  if not rank_wanted then
    return 0
  elseif kind == 'competition' then
    return call('ZCOUNT', zkey, '-inf', '(' .. zformat(score)) + 1
  elseif kind == 'dense' then
    return call_on(dkey, 'zset', 'distinct scores', 'ZCOUNT', '-inf',
      '(' .. zformat(score)) + 1
  end
  return call('ZRANK', zkey, key) + 1
end

-- Dense boards count the members at each score: the distinct scores are a
-- sorted set of their own, for ranks without a scan.
local function count_score(score, delta)
  local zs = zformat(score)
  local c = call('HINCRBY', ckey, zs, delta)
  if c <= 0 then
    call('HDEL', ckey, zs)
    call('ZREM', dkey, zs)
  elseif c == 1 and delta == 1 then
    call('ZADD', dkey, zs, zs)
  end
end

local function expect_once(key, want, what)
  if not typed[key] then
    expect(key, want, what)
    typed[key] = true
  end
end

-- A member's value in the times hash: its prefix (PREFIX_LEN bytes),
-- then its sorted-set score as a big-endian 8-byte integer (orderkey.h),
-- so that an update reads its place with one HGET, without a ZSCORE.
-- Binary rather than text: 8 bytes after a 6-byte prefix keep the value
-- in Redis's 16-byte allocation, where a score's digits take up to 24
-- (bench/README.md of 4968f11).
local function place_of(v)
  return sub(v, 1, PREFIX_LEN), (sunpack('>i8', v, PREFIX_LEN + 1))
end

-- The value place_of reads: prefix, then the sorted-set score z.
local function place(prefix, z)
  return prefix .. spack('>i8', z)
end

-- The places of members (an array) on the board, by position: their
-- prefixes (false: not on it) and their sorted-set scores; and how many
-- are on it.
local function read_places(members)
  local places = call_on(tkey, 'hash', 'member times', 'HMGET',
    unpack(members))
  local prefixes, zscores, found = {}, {}, 0
  for i = 1, #members do
    local v = places[i]
    if v then
      found = found + 1
      prefixes[i], zscores[i] = place_of(v)
    else
      prefixes[i] = false
    end
  end
  return prefixes, zscores, found
end

local function load_places()
  local members = {}
  for i = 1, count do
    local member = ARGV[HEAD + (i - 1) * PER_UPDATE + 1]
    if prefix_of[member] == nil then
      prefix_of[member] = false
      members[#members + 1] = member
    end
  end
  local prefixes, zscores = read_places(members)
  for j, member in ipairs(members) do
    if prefixes[j] then
      prefix_of[member], zscore_of_member[member] = prefixes[j], zscores[j]
    end
  end
end

-- Deferred: the member, whose prefix was was (nil: not on the board), is
-- now at prefix with sorted-set score zscore (prefix nil: off the board).
-- Its sorted-set keys (prefix .. member) are made by flush, once a member.
local function place_member(member, was, prefix, zscore)
  if was_prefix[member] == nil then
    was_prefix[member] = was or false
    moved_members[#moved_members + 1] = member
  end
  prefix_of[member] = prefix or false
  zscore_of_member[member] = zscore
end

-- The member's data is now data ('': none): at once, or deferred.
local function data_member(member, data)
  if not deferred then
    if data == '' then
      call('HDEL', akey, member)
    else
      call('HSET', akey, member, data)
    end
    return
  end
  if data_of[member] == nil then
    data_members[#data_members + 1] = member
  end
  data_of[member] = data
end

-- command on key with args, unless there are none; in parts of at most
-- UNPACK_MAX arguments (pairs stay whole), as Lua cannot unpack more into
-- one call's arguments.
local UNPACK_MAX = 4000
local function call_with(command, key, args)
  local n = #args
  if n > UNPACK_MAX then
    for i = 1, n, UNPACK_MAX do
      call(command, key, unpack(args, i, math.min(i + UNPACK_MAX - 1, n)))
    end
  elseif n > 0 then
    call(command, key, unpack(args))
  end
end

-- A member's data, as the writes of a batch hold it: deleted when ''
-- (adel), else set (aset); and their commands.
local function data_write(aset, adel, member, data)
  if data == '' then
    adel[#adel + 1] = member
  else
    aset[#aset + 1] = member
    aset[#aset + 1] = data
  end
end

local function write_data(aset, adel)
  call_with('HDEL', akey, adel)
  call_with('HSET', akey, aset)
end

-- Deferred: the batch's writes, a command per key and kind.
local function flush()
  if not deferred then
    return
  end
  local zrem, zadd, hset, hdel = {}, {}, {}, {}
  for _, member in ipairs(moved_members) do
    local was, p = was_prefix[member], prefix_of[member]
    if was and was ~= p then
      zrem[#zrem + 1] = was .. member
    end
    if p then
      local z = zscore_of_member[member]
      zadd[#zadd + 1] = z
      zadd[#zadd + 1] = p .. member
      hset[#hset + 1] = member
      hset[#hset + 1] = place(p, z)
    elseif was then
      hdel[#hdel + 1] = member
    end
  end
  call_with('ZREM', zkey, zrem)
  call_with('ZADD', zkey, zadd)
  call_with('HDEL', tkey, hdel)
  call_with('HSET', tkey, hset)
  local aset, adel = {}, {}
  for _, member in ipairs(data_members) do
    data_write(aset, adel, member, data_of[member])
  end
  write_data(aset, adel)
  moved_members, was_prefix, data_members, data_of = {}, {}, {}, {}
end

local REUSED = 'RANK_INVALID request_id: already used on this board ' ..
  'for another member, value, mode, subscores or data'

-- Applies the update whose arguments follow ARGV[at]. Returns its reply's
-- four values (score, rank, applied, subscores), or its error reply.
local function apply(at)
  -- The update's arguments (store_update.c, UpdateArg and WhatByte): its
  -- member; its mode, keep_subs (1: subscores absent), data_given,
  -- request-id record and hash ('' in a batch recorded as a whole), value
  -- and data ('' unless given); the prefix starts at p0 of what and ends
  -- before v0, and is cut out only for an update that moves the member (a
  -- string.sub costs Redis about 1k instructions: its string is hashed,
  -- made and collected). This function writes out the ones it calls for
  -- every update (a Lua function call costs Redis about 0.2k: see lookup).
  local member = ARGV[at + 1]
  local what = ARGV[at + 2]
  local mode, keep_subs, data_given, id_len, prefix_len, value_len =
    byte(what, 1, 6)
  local p0 = 7 + id_len
  local v0 = p0 + prefix_len
  local record, idhash = '', ''
  if id_len > 0 then
    record, idhash = sub(what, 7, 10), sub(what, 11, p0 - 1)
  end
  data_given = data_given == 1
  local value = sunpack('>i8', what, v0)
  local data = data_given and sub(what, v0 + value_len) or ''
  local nsub = prefix_len - TIME_BYTES
  local subs = nsub > 0 and sub(what, p0, p0 + nsub - 1) or ''

  -- A batch recorded as a whole records none of its updates.
  local seen, hash, mark
  if not grouped then
    hash, mark = lookup(idhash)
  end

  -- The member's place: its sorted-set key (deferred: its prefix, which
  -- flush makes the key of, once a member), score and subscores.
  local p, key, old, old_subs
  if deferred then
    p = prefix_of[member]
    if p then
      key = p
      old = zscore_of(zscore_of_member[member])
    end
  else
    touch_key, touch_want, touch_what = tkey, 'hash', 'member times'
    p = call('HGET', tkey, member)
    if p then
      -- place_of and zscore_of, written out (see lookup).
      p, old = sub(p, 1, PREFIX_LEN), sunpack('>i8', p, PREFIX_LEN + 1)
      if not ascending then
        old = -old
      end
      key = p .. member
    end
  end
  if p then
    old_subs = nsub > 0 and sub(p, 1, nsub) or ''
  end

  -- Before the first write: the keys this update writes that it has not
  -- read hold their types.
  -- (expect_once's own test first, written out: see lookup.)
  if not typed[zkey] then
    expect_once(zkey, 'zset', 'scores')
  end
  if data_given or mode == 4 or cap ~= '0' then
    expect_once(akey, 'hash', 'member data')
  end
  if kind == 'dense' then
    expect_once(dkey, 'zset', 'distinct scores')
    expect_once(ckey, 'hash', 'members per score')
  end

  -- The first write: the record. HSETNX finds a live record of this id in
  -- its hash, and writes none then.
  -- (write_record, written out.)
  if hash then
    touch_key, touch_want, touch_what = hash, 'hash', 'request-id records'
    if call('HSETNX', hash, idhash, record) ~= 1 then
      seen = found_record(hash, idhash, record)
    end
  end
  if seen then
    if not same_request(seen, record) then
      return error_reply(REUSED)
    end
    if not key then
      return 0, 0, 0, ''
    end
    return old, rank_of(key, old), 0, old_subs
  end

  -- Remove (mode 4, rankd's Remove): the member and its data go. Returns
  -- {the score it had, 1 if it was on the board, 1}.
  if mode == 4 then
    recorded(hash, mark)
    if key and window_on then
      window_removed(member)
    end
    if key then
      if deferred then
        place_member(member, key)
        data_member(member, '')
      else
        call('ZREM', zkey, key)
        call('HDEL', tkey, member)
        call('HDEL', akey, member)
      end
      if kind == 'dense' then
        count_score(old, -1)
      end
    end
    return old or 0, key and 1 or 0, 1, ''
  end
  local given_subs = subs
  if keep_subs == 1 and old_subs then
    subs = old_subs
  end
  local new, new_subs = old, old_subs
  if mode == 1 then
    new, new_subs = (old or 0) + value, subs
  elseif mode == 2 then
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
    if hash then
      call('HDEL', hash, idhash)
    end
    return error_reply(format(
      'RANK_INVALID value: current score %d + %d is outside -%d..%d',
      old or 0, value, LIMIT, LIMIT))
  end
  -- The board's rolling window (window.lua), checked before the first
  -- write of the update too.
  if window_on and (new ~= old or new_subs ~= old_subs) then
    local refused = window_apply(member, old, old_subs, new, new_subs,
      sub(what, v0 - TIME_BYTES, v0 - 1))
    if refused then
      if hash then
        call('HDEL', hash, idhash)
      end
      return error_reply(refused)
    end
  end
  recorded(hash, mark)

  -- An update that leaves the score (and subscores) as they were keeps the
  -- old time: whoever reached a score first stays ahead of those who reach
  -- it later.
  local moved = new ~= old or new_subs ~= old_subs
  if moved then
    -- The prefix as given, unless the subscores kept are the member's own.
    local prefix
    if new_subs ~= given_subs then
      prefix = new_subs .. sub(what, p0 + nsub, v0 - 1)
    else
      prefix = sub(what, p0, v0 - 1)
    end
    if deferred then
      place_member(member, key, prefix, zscore_of(new))
      key = prefix
    else
      if key then
        call('ZREM', zkey, key)
      end
      key = prefix .. member
      -- A number, which Redis formats exactly (%.17g of an integer under
      -- 2^53). (zscore_of and place, written out.)
      local z = ascending and new or -new
      call('ZADD', zkey, z, key)
      call('HSET', tkey, member, prefix .. spack('>i8', z))
    end
  end
  if data_given then
    data_member(member, data)
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
  if cap ~= '0' and moved and call('ZCARD', zkey) > tonumber(cap) then
    local worst = call('ZPOPMAX', zkey)
    local gone = sub(worst[1], nsub + 7)
    call('HDEL', tkey, gone)
    call('HDEL', akey, gone)
    if kind == 'dense' then
      count_score(zscore_of(tonumber(worst[2])), -1)
    end
    ranked = worst[1] ~= key
  end
  if not ranked then
    return new, 0, 1, ''
  elseif rank_wanted and kind ~= 'competition' and kind ~= 'dense' then
    -- (rank_of's ordinal rank, written out.)
    return new, call('ZRANK', zkey, key) + 1, 1, new_subs
  end
  return new, rank_of(key, new), 1, new_subs
end

-- Deferred: the places are read with the first update, so that a damaged
-- key there stops the batch at it, as any update's does, with nothing
-- changed.
local function load_and_apply(at)
  load_places()
  return apply(at)
end

-- Every update of the call answers r (whatever was answered before).
local function answer_all(r)
  for i = count + 1, out do
    results[i] = nil
  end
  for i = 1, count do
    results[i] = r
  end
  out = count
end

-- The error met in a pcall (ok false), as a string.
local function error_text(r)
  -- Redis 7's pcall hands an error table over as its message.
  if type(r) == 'table' then
    r = r.err
  end
  return tostring(wrongtype_named(r))
end

local GROUP_REUSED = 'RANK_INVALID request_id: already used on this ' ..
  'board for another batch'

local function unpack_sets(pack)
  local n, at, last = 0, 1, #pack
  while at <= last do
    local member_hi, member_lo, prefix_len, value_len, data_given, data_hi,
      data_lo = byte(pack, at, at + 6)
    local p0 = at + 7
    local m0 = p0 + prefix_len
    local t0 = m0 + member_hi * 256 + member_lo
    local v0 = t0 + prefix_len + 8
    local d0 = v0 + value_len
    local member = sub(pack, m0, t0 - 1)
    at = d0 + data_hi * 256 + data_lo
    n = n + 1
    set_members[n] = member
    set_hset[2 * n - 1], set_hset[2 * n] = member, sub(pack, t0, v0 - 1)
    set_zadd[2 * n - 1], set_zadd[2 * n] = sub(pack, v0, d0 - 1),
      sub(pack, p0, t0 - 1)
    if data_given == 1 then
      sets_with_data = true
      data_write(set_aset, set_adel, member, sub(pack, d0, at - 1))
    end
  end
  if n ~= count or at ~= last + 1 or #ARGV ~= HEAD + 1 then
    error({err = 'RANK_UNAVAILABLE not applied: the batch reached Redis ' ..
      'in parts; send it again'})
  end
end

local function load_sets()
  unpack_sets(ARGV[HEAD + 1])
  set_prefix, set_zscore, set_found = read_places(set_members)
  expect_once(zkey, 'zset', 'scores')
  if sets_with_data then
    expect_once(akey, 'hash', 'member data')
  end
end

-- Applies the updates of a batch of sets (load_sets first), with a command
-- per key and kind: each member gets the score, subscores and time sent,
-- unless score and subscores are its own already (it keeps its time:
-- whoever reached a score first stays ahead). The score goes to ZADD as
-- the text rankd formats: a Lua number would be printed with %.17g first
-- (about 3.5k instructions; bench/instructions.sh).
local function set_as_sent()
  local zrem, zadd, hset = {}, set_zadd, set_hset
  if set_found > 0 then
    zadd, hset = {}, {}
    local nr, nz, nh = 0, 0, 0
    for i = 1, count do
      local member, tvalue = set_hset[2 * i - 1], set_hset[2 * i]
      local prefix = sub(tvalue, 1, PREFIX_LEN)
      local zscore = set_zadd[2 * i - 1]
      local p = set_prefix[i]
      local moved = true
      if p then
        local nsub = PREFIX_LEN - TIME_BYTES
        moved = set_zscore[i] ~= tonumber(zscore)
          or sub(p, 1, nsub) ~= sub(prefix, 1, nsub)
      end
      if moved then
        if p ~= prefix and p then
          nr = nr + 1
          zrem[nr] = p .. member
        end
        hset[nh + 1], hset[nh + 2] = member, tvalue
        nh = nh + 2
        zadd[nz + 1], zadd[nz + 2] = zscore, set_zadd[2 * i]
        nz = nz + 2
      end
    end
  end
  call_with('ZREM', zkey, zrem)
  call_with('ZADD', zkey, zadd)
  call_with('HSET', tkey, hset)
  write_data(set_aset, set_adel)
end

-- A batch recorded as a whole (group): one record stands for all its
-- updates, which apply all or nothing. rankd sends such a batch alone in
-- its call, and only where the call is deferred: nothing is written
-- before the last update is computed, so a refused one drops the writes
-- of the others with it.
local function apply_group()
  if not deferred then
    return answer_all(error_reply('RANK_INVALID request_id: a batch ' ..
      'recorded as a whole needs a board without a cap or dense ranks, ' ..
      'and no ranks'))
  end
  if byte(group, 15) ~= count then
    return answer_all(error_reply('RANK_UNAVAILABLE not applied: ' ..
      'the batch reached Redis in parts; send it again'))
  end
  local grecord, gid = sub(group, 1, 4), sub(group, 5, 14)
  -- seen: the batch's live record, if any (else nil: written now), or
  -- the error met.
  local ok, seen, ghash, gmark = pcall(function()
    if sets then
      load_sets()
    else
      load_places()
    end
    local hash, mark = lookup(gid)
    return write_record(hash, gid, grecord), hash, mark
  end)
  if not ok then
    local r = error_text(seen)
    if sub(r, 1, 13) ~= 'RANK_DAMAGED ' then
      error({err = r})
    end
    return answer_all(error_reply(r))
  end
  if seen then
    if not same_request(seen, grecord) then
      return answer_all(error_reply(GROUP_REUSED))
    end
    -- Applied before: each update answers the member's place now.
    for i = 1, count do
      local p, zscore, prefix_len
      if sets then
        p, zscore = set_prefix[i], set_zscore[i]
        prefix_len = PREFIX_LEN
      else
        local at = HEAD + (i - 1) * PER_UPDATE
        local member = ARGV[at + 1]
        p, zscore = prefix_of[member], zscore_of_member[member]
        -- (The prefix's length is the 5th byte of what.)
        prefix_len = byte(ARGV[at + 2], 5)
      end
      if p then
        results[out + 1] = zscore_of(zscore)
        results[out + 4] = sub(p, 1, prefix_len - TIME_BYTES)
      else
        results[out + 1], results[out + 4] = 0, ''
      end
      results[out + 2], results[out + 3] = 0, 0
      out = out + 4
    end
    return
  end
  if sets then
    set_as_sent()
    recorded(ghash, gmark)
    as_sent = true
    if window_on then
      window_all(set_members)
      window_flush()
    end
    return
  end
  for i = 1, count do
    local done, r, rank, applied, subs =
      pcall(apply, HEAD + (i - 1) * PER_UPDATE)
    local failed
    if done and type(r) == 'table' then
      failed = r.err
    elseif not done then
      failed = error_text(r)
    end
    if failed then
      -- Nothing of the batch is written, and its record goes again.
      call('HDEL', ghash, gid)
      local as = sub(failed, 1, 13) == 'RANK_INVALID ' and
        'RANK_INVALID' or 'RANK_UNAVAILABLE'
      answer_all(error_reply(as .. ' not applied: requests[' ..
        (i - 1) .. '] of the same batch was refused, and a batch with a ' ..
        'request_id applies all or nothing'))
      results[i] = error_reply(failed)
      return
    end
    results[out + 1], results[out + 2] = r, rank
    results[out + 3], results[out + 4] = applied, subs
    out = out + 4
  end
  flush()
  recorded(ghash, gmark)
  if window_on then
    window_flush()
  end
end
-- The call, in three functions (Lua 5.1 lets a function use at most 60
-- of the library's locals): the batch's arguments, the board's meta and
-- its layout.
local function open_call()
  zkey, tkey, qprefix, dkey, ckey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  akey = KEYS[6]
  -- The batch's arguments, one a line, in the order rankd gives them
  -- (store_update.c, BatchArg; tests/test_requestid.c checks the two agree).
  -- The buckets of the window, by name: names[0] the current one, names[i]
  -- the one i before it.
  names = {[0] = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]}
  record_expire_at = ARGV[6]
  local answer = ARGV[7]
  order = ARGV[8]
  kind = ARGV[9]
  cap = ARGV[10]
  expire_at = ARGV[11]
  group = ARGV[12]
  wcombine = ARGV[13]
  grouped = group ~= ''

  -- A batch recorded as a whole whose updates each SET a member of their
  -- own (an import's; rankd says so in the group argument, and gives each
  -- update's sorted-set score as its value) comes as one argument, its
  -- updates one after another: four string.subs of it give an update's four
  -- strings (about 0.8k instructions each), where two arguments of its own
  -- (about 1.2k each: the parse, the object, the Lua string), two subs and
  -- a concatenation did (bench/README.md of 4968f11). Each update is a header (SetByte
  -- of store_update.c): its member's length (2 bytes), the lengths of its
  -- prefix and value, data given (1: set or, when empty, delete the
  -- member's data), its data's length (2 bytes); then its prefix, member,
  -- its value in the times hash (the prefix again, then the sorted-set score
  -- in 8 bytes, as place makes it), its value (the sorted-set score as text)
  -- and data: the prefix and member are its sorted-set member as written.
  sets = grouped and byte(group, 24) == 1

  -- The updates in this call (a batch of sets says how many it packed).
  count = sets and byte(group, 15) or (#ARGV - HEAD) / PER_UPDATE
  -- The length of the board's prefixes (its time and subscores), as the
  -- first update gives it: the 3rd byte of a set's header, else the 5th of
  -- the update's what.
  PREFIX_LEN = count == 0 and 0 or sets and byte(ARGV[HEAD + 1], 3)
    or byte(ARGV[HEAD + 2], 5)

  rank_wanted = answer == 'rank'
  applied_only = answer == 'applied'
  ascending = order == 'asc'
  current = tonumber(names[0])
  -- The expiry of a hash marked in the bucket before this one: the end of
  -- its bucket + 5, one bucket (record_expire_at / (current + 6) ms)
  -- before record_expire_at.
  -- (Divided first: the product would pass 2^53 and round.)
  swept_after = tonumber(record_expire_at)
  swept_after = swept_after - swept_after / (current + 6)

  -- A record's value starts with its bucket, mod 16, in the top 4 bits.
  epoch = current % 16

  -- The board's meta: its layout, and the records of the window's buckets.
  meta = call_on(qprefix, 'hash', 'request-id meta', 'HMGET', 's', 'o',
    'm', names[0], names[1], names[2], names[3], names[4])
  hashes_s, leaving_s = meta[1], meta[2]
  hashes, leaving = tonumber(hashes_s), tonumber(leaving_s)
  migrated = tonumber(meta[3]) or 0
  n = tonumber(meta[4]) or 0
  live = n
  for i = 5, 8 do
    live = live + (tonumber(meta[i]) or 0)
  end
  opened = not meta[4]
  layout_changed = false
  records_added = 0

  -- The layout: sized for this call on a new (or idle) board; grown or shrunk
  -- when none is being left.
  if not hashes then
    hashes = hashes_for(live + count)
    hashes_s = format('%d', hashes)
    layout_changed = true
  elseif not leaving then
    local size = hashes
    if live > hashes * FULL_HASH and hashes < MAX_HASHES then
      size = math.max(math.min(hashes * GROWTH, MAX_HASHES),
        hashes_for(live + count))
    elseif hashes > 1 and live + count < hashes * LOW_HASH then
      size = hashes_for(live + count)
    end
    if size ~= hashes then
      leaving, leaving_s, migrated = hashes, hashes_s, 0
      hashes, hashes_s = size, format('%d', size)
      layout_changed = true
    end
  end
  current_base, leaving_base = layout_base(hashes_s), layout_base(leaving_s)
end
-- This call's share of the hashes of the layout being left (from migrated
-- on) moves, so that every lookup after it finds each record where it is.
-- Every hash read and every hash written is checked before the first
-- write: a damaged one stops the call with nothing changed.
-- A layout that grows (by a power of 2) splits each hash: hash j of the
-- layout left becomes hash j of the new one by a RENAME (its records and
-- expiry, its mark, stay where they are, with no command argument of
-- theirs), and only the records bound for the new layout's other hashes (j
-- + s, j + 2s, ..: the half of them, when it doubles) move there, and go
-- from j. Records no longer live go with them.
-- (Counted with callgrind, a move cost Redis 14.9k instructions a record
-- when every record was written again, 13.4k split: bench/README.md of 4968f11, "What a
-- layout's growth costs".) A layout
-- that shrinks merges hashes: each record is written again into its new
-- hash. A hash records move into is marked now: it expires at the end of
-- the current bucket + 5, after every live record it holds.
local function move_share()
  local last = math.min(migrated + math.max(count, MIGRATE_MIN), leaving)
  local split = hashes > leaving
  local from, into, targets, renames = {}, {}, {}, {}
  for j = migrated, last - 1 do
    local key = record_hash(leaving_base, leaving, j)
    local all = call_on(key, 'hash', 'request-id records', 'HGETALL')
    -- Split: the hash's name in the new layout, unless a hash holds it.
    local kept, dropped
    if #all > 0 and split then
      local as = record_hash(current_base, hashes, j)
      local found = call('TYPE', as).ok
      if found == 'none' then
        kept, dropped = as, {}
        renames[#renames + 1] = {key, as, dropped}
      elseif found ~= 'hash' then
        damaged(as, found, 'hash', 'request-id records')
      end
    end
    if #all > 0 and not kept then
      from[#from + 1] = key
    end
    for i = 1, #all, 2 do
      local field, value = all[i], all[i + 1]
      -- By the target hash's number: its name is made once a target, not
      -- once a record.
      local at = selector_of(field) % hashes
      local live = live_record(value)
      if kept and (at ~= j or not live) then
        dropped[#dropped + 1] = field
      end
      if live and not (kept and at == j) then
        local moving = into[at]
        if not moving then
          moving = {}
          into[at] = moving
          targets[#targets + 1] =
            {record_hash(current_base, hashes, at), moving}
        end
        moving[#moving + 1] = field
        moving[#moving + 1] = value
      end
    end
  end
  for _, target in ipairs(targets) do
    expect(target[1], 'hash', 'request-id records')
  end
  for _, r in ipairs(renames) do
    call('RENAME', r[1], r[2])
    call_with('HDEL', r[2], r[3])
  end
  for _, target in ipairs(targets) do
    call_with('HSET', target[1], target[2])
    call('PEXPIREAT', target[1], record_expire_at)
  end
  if #from > 0 then
    call('DEL', unpack(from))
  end
  migrated = last
  if migrated >= leaving then
    leaving, leaving_s = nil, nil
  end
  layout_changed = true
end
-- The moves of a layout being left, the batch's tables, and a batch
-- recorded as a whole.
local function prepare_call()
  if leaving then
    move_share()
  end

  -- The key an update reads next with a plain redis.call (call_on's pcall
  -- costs about as much again), and what rankd keeps there: a WRONGTYPE met
  -- then is named as call_on names it (wrongtype_named).
  touch_key, touch_want, touch_what = nil, nil, nil

  -- Keys whose type this batch checked (no other client runs meanwhile, and
  -- its own writes keep them).
  typed = {}

  -- Writes. A batch whose updates want no rank, on a board without a cap or
  -- dense ranks (an import, the queue's drain, a sharded board), is
  -- deferred: its members' places are read at once (one HMGET of their
  -- times, one ZMSCORE of their keys) and kept in tables as each update
  -- changes them, and written once every update is computed: one ZREM,
  -- ZADD, HSET and HDEL per key carry them all. Any other batch reads and
  -- writes each update's place as it goes, for the ranks (and cap trims) of
  -- the updates after it. (Lua tables cost Redis more than the redis.calls
  -- they would save there: callgrind, bench/instructions.sh.)
  deferred = not rank_wanted and cap == '0' and kind ~= 'dense'
  -- Deferred: each member's prefix (false: not on the board) and sorted-set
  -- score, as the updates so far leave them; the members whose place or
  -- data changed, in order, with their prefixes before the batch (false:
  -- not on the board) and their data now ('': none). Made only for a
  -- deferred batch, as the tables of a batch of sets below only for one:
  -- a table costs Redis its making and its collection, about 1k
  -- instructions, and a call of one update made 11 it never used
  -- (bench/README.md of 4968f11, "What a script call costs"). Else nil, so that no
  -- call keeps an earlier call's tables alive.
  if deferred then
    prefix_of, zscore_of_member = {}, {}
    moved_members, was_prefix = {}, {}
    data_members, data_of = {}, {}
  else
    prefix_of, zscore_of_member, moved_members, was_prefix, data_members,
      data_of = nil
  end

  results, out = {}, 0

  -- A batch of sets (above) is answered as sent: it returns the number of
  -- its updates instead of their replies, and rankd answers each with the
  -- score and subscores it sent, rank 0, applied, which is what a SET
  -- applied leaves whatever the member had. (The replies would cost Redis a
  -- Lua table and 4 reply elements an update, and rankd their parse.) Its
  -- updates are unpacked by position straight into the arguments of the
  -- commands that write them as members new to the board (HSET of the
  -- times, ZADD), without the tables by member of load_places; a batch
  -- that finds some of its members on the board is sorted out after.
  as_sent = false
  -- Each update's member; {member, prefix} and {value, sorted-set member}
  -- of each, one after another; its data's writes (data_write).
  if grouped then
    set_members, set_hset, set_zadd = {}, {}, {}
    set_aset, set_adel = {}, {}
  else
    set_members, set_hset, set_zadd, set_aset, set_adel = nil
  end
  sets_with_data = false
  -- Each update's member's prefix on the board (false: not on it) and its
  -- sorted-set score then; how many were on it.
  set_prefix, set_zscore, set_found = nil, nil, nil

  if grouped then
    apply_group()
  end
  stopped = nil
end
-- A period's keys ("rk:{board}:p:LABEL:z", ...) are listed in their tag's
-- registry of periods, "rk:{board}:k" (label -> when the period's keys
-- expire), which admin calls read instead of searching the keyspace
-- (store_admin.c; clear.lua takes a period out with its keys). Each call
-- that writes a period adds it (a period a DeleteBoard took out meanwhile
-- is back with its next keys): one ZADD of a small sorted set. A label new
-- to it, or a later expiry, also drops the labels whose keys have expired
-- and sets the registry to expire with its newest period. By pcall: a key
-- of another type there (damaged) fails the admin calls that read it,
-- which say so, not the update, whose writes are done.
local function register_period()
  local tag_end = string.find(zkey, '}:', 1, true) + 1
  local registry = sub(zkey, 1, tag_end) .. 'k'
  if redis.pcall('ZADD', registry, 'CH', expire_at, sub(zkey, tag_end + 3, -3))
      == 1 then
    local now = redis.call('TIME')
    redis.pcall('ZREMRANGEBYSCORE', registry, '-inf', '(' .. now[1] .. '000')
    redis.pcall('PEXPIREAT', registry, expire_at, 'NX')
    redis.pcall('PEXPIREAT', registry, expire_at, 'GT')
  end
end

-- The updates, the meta they leave, the expiries, and the reply.
local function apply_call()
  for i = 1, grouped and 0 or count do
    if stopped then
      out = out + 1
      results[out] = error_reply('RANK_UNAVAILABLE not applied: ' .. stopped)
    else
      local first = i == 1 and deferred
      local ok, r, rank, applied, subs = pcall(
        first and load_and_apply or apply, HEAD + (i - 1) * PER_UPDATE)
      if not ok then
        r = error_text(r)
      end
      if ok and type(r) == 'table' then
        out = out + 1
        results[out] = r
      elseif ok and applied_only then
        -- One element, not four: its table entries and its reply cost
        -- Redis a quarter.
        out = out + 1
        results[out] = applied
      elseif ok then
        results[out + 1], results[out + 2] = r, rank
        results[out + 3], results[out + 4] = applied, subs
        out = out + 4
      else
        -- Damaged data, or any other error: this update changed nothing
        -- (every command that can fail runs before its first write); the
        -- batch stops here. What the updates before it did is written, as
        -- each would have been alone, with what the call leaves after them
        -- (the meta, a layout move's progress, a period's expiry), which an
        -- error raised here would skip.
        r = tostring(r)
        out = out + 1
        results[out] = error_reply(r)
        stopped = 'an update before it in the same batch met ' .. r
      end
    end
  end
  if not grouped then
    flush()
    if window_on then
      window_flush()
    end
  end

  -- What the records of this batch leave in the meta hash (and, in a bucket's
  -- first call, its expiry and the fields of buckets out of the window), and
  -- the expiry of a period's keys.
  -- (A new board's first call that records nothing leaves no meta.)
  if records_added > 0 or (layout_changed and meta[1]) then
    local fields = {'HSET', qprefix}
    if records_added > 0 then
      fields[#fields + 1] = names[0]
      fields[#fields + 1] = n + records_added
    end
    if layout_changed then
      fields[#fields + 1] = 's'
      fields[#fields + 1] = hashes_s
      if leaving then
        fields[#fields + 1] = 'o'
        fields[#fields + 1] = leaving_s
        fields[#fields + 1] = 'm'
        fields[#fields + 1] = migrated
      end
    end
    if #fields > 2 then
      call(unpack(fields))
    end
    if meta[2] and not leaving then
      call('HDEL', qprefix, 'o', 'm')
    end
    if opened then
      local all = call('HGETALL', qprefix)
      local stale = {}
      for j = 1, #all, 2 do
        local k = tonumber(all[j])
        if k and (k < current - BUCKETS or k > current + BUCKETS) then
          stale[#stale + 1] = all[j]
        end
      end
      if #stale > 0 then
        call('HDEL', qprefix, unpack(stale))
      end
      call('PEXPIREAT', qprefix, record_expire_at)
    end
  end
  if records_added > 0 and expire_at ~= '0' then
    register_period()
    call('PEXPIREAT', zkey, expire_at)
    call('PEXPIREAT', tkey, expire_at)
    call('PEXPIREAT', akey, expire_at)
    if kind == 'dense' then
      call('PEXPIREAT', dkey, expire_at)
      call('PEXPIREAT', ckey, expire_at)
    end
  end
  if as_sent then
    return count
  end
  return results
end

-- Lua's collector keeps its default pace (pause 200%: a cycle starts once
-- the heap has doubled). An earlier build set pause 100% at each call,
-- timed at 0.88x the Redis CPU per update (bench/README.md of 4968f11,
-- "What the Lua heap costs"), but the pause is the Lua VM's, which every
-- script and function library of a Redis shares, other applications' too:
-- a library must not change it for them. Timed again, each build on a redis-server
-- of its own (bench/ab.sh, OP=update MEMBERS=200000 DURATION=5 WARMUP=1
-- APART=1 PEER=none, a busy machine; Redis µs per update, A then B):
-- ROUNDS=3, pause 100 25.75, 19.19, 22.30 (median 22.30) against none
-- 20.36, 17.66, 17.86 (median 17.86, 0.80x). Single rounds: pause 100
-- 25.71 against none 27.88; none 19.51 against pause 100 set for the
-- call only and put back after it (a pcall around the call) 24.90; pause
-- 100 26.89 against per call 22.81. No gain beyond the noise, so no
-- setting, neither global nor per call.
redis.register_function(FUNCTION_NAME, function(keys, args)
  KEYS, ARGV = keys, args
  sub, byte = string.sub, string.byte
  call, error_reply, tonumber, format, floor, spack, sunpack, unpack, pcall,
    type = builtins()
  open_call()
  window_open()
  prepare_call()
  return apply_call()
end)
