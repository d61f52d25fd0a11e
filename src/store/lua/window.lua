
-- window.lua: rolling windows (board option window=N), the end of the
-- update library: the build appends it to update.lua (src/store/embed.cmake),
-- whose locals it assigns (window_open ..., declared there) and whose
-- helpers it calls.
--
-- A board with a window keeps, beside its periods, the combination of the
-- current period and the N-1 before it as a board of its own, under the
-- period label "window" (rk:{board}:p:window:z and :t, as a period's; a
-- shard's under its own tag). mode=increment boards combine by sum: a
-- member's window score is the sum of its scores in the window's periods,
-- its time (the tie-break) the latest of their times, its subscores those
-- of that latest entry. mode=best boards keep the best (score, subscores)
-- of its periods, at the earliest time one of them reached it. So the
-- window at any moment is what a combination of its periods from scratch
-- gives (a total past +-(2^53-1), which only positive and negative points
-- near the limit can give, is held at the limit).
--
-- The state, rk:{board}:w (a hash): s, the labels of the periods the
-- window served holds, newest first, comma-separated; hs, the start (Unix
-- ms) of the newest of them; e, when the window's keys expire (with its
-- newest period's). While a roll builds the next window: n and
-- ns, the same of the window being built (under the label "window-next"),
-- src the sources it still reads (the labels of periods, or "window"),
-- and c the HSCAN cursor in the first of them.
--
-- An update of a period the served window holds changes the window in the
-- same call; while a roll builds the next one, an update of a period that
-- one holds changes it too (its member computed again from its periods).
-- The roll (the function registered below, rankd's store_window.c calls it
-- until it answers done) is started by the first call after a period ends:
-- it reads every member of the window served and of the periods that
-- enter, computes each one's place in the next window from its periods
-- (or copies it, when none of the periods that leave or enter has it), and
-- writes it there, a chunk a call; then renames the next window over the
-- served one in one call. Reads answer the window served until then: the
-- old window (with the updates of its own periods) until the roll ends,
-- then the new one, never a mix (on a sharded board, each shard rolls on
-- its own).

local WINDOW, NEXT = 'window', 'window-next'
-- This call's window: the times hashes of the periods of the window served
-- and of the one built (and their labels, as sets), the keys' prefixes of
-- the two windows; its period's label; whether the call's period is in
-- each.
local wbase, wserved, wserved_set, wnext, wnext_set, wkeys, xkeys, wlabel,
  in_served, in_next, wexpire, wfresh
-- Members whose window places change in this call, in order; for each, its
-- window entry as the updates so far leave it ({score, subscores, time},
-- false: absent), what the window's times hash held for it before the call
-- (false: nothing), and whether its place must be computed from its periods.
local wmembers, wentry, wwas, wagain

local function labels_of(text)
  local list, set = {}, {}
  if text then
    for label in string.gmatch(text, '[^,]+') do
      list[#list + 1] = label
      set[label] = true
    end
  end
  return list, set
end

-- A window entry's score, subscores and time from a times-hash value.
local function entry_of(v)
  local nsub = PREFIX_LEN - TIME_BYTES
  local z = sunpack('>i8', v, PREFIX_LEN + 1)
  return ascending and z or -z, sub(v, 1, nsub), sub(v, nsub + 1, PREFIX_LEN)
end

-- Whether (score, subs) beats (s2, subs2) in the board's order.
local function better(score, subs, s2, subs2)
  if score ~= s2 then
    return (ascending and score < s2) or (not ascending and score > s2)
  end
  return before(subs, subs2)
end

-- The times hashes of the periods labels (names made once a call, not
-- once a member).
local function times_keys(labels)
  local keys = {}
  for i, label in ipairs(labels) do
    keys[i] = wbase .. 'p:' .. label .. ':t'
  end
  return keys
end

-- Folds one period's entry of a member (its times-hash value v) into acc,
-- {total or score, subscores, time} (nil: none yet); returns acc.
local function fold(acc, v)
  local s, u, t = entry_of(v)
  if not acc then
    return {s, u, t}
  end
  if wcombine == 'sum' then
    acc[1] = acc[1] + s
    if before(acc[3], t) then
      acc[2], acc[3] = u, t
    end
  elseif better(s, u, acc[1], acc[2]) then
    acc[1], acc[2], acc[3] = s, u, t
  elseif s == acc[1] and u == acc[2] and before(t, acc[3]) then
    acc[3] = t
  end
  return acc
end

-- A folded entry's score, subscores and time (nil: in no period); a total
-- past the range is held at its end.
local function folded(acc)
  if not acc then
    return nil
  end
  local score = acc[1]
  if score > LIMIT then
    score = LIMIT
  elseif score < -LIMIT then
    score = -LIMIT
  end
  return score, acc[2], acc[3]
end

-- Many members' entries over the periods of keys (members[j] for j in
-- which): one HMGET a period. Into entries[j] ({score, subscores, time},
-- or false).
local function combine_many(members, which, keys, entries)
  local names, accs = {}, {}
  for i, j in ipairs(which) do
    names[i] = members[j]
  end
  for _, key in ipairs(keys) do
    local values = call_on(key, 'hash', 'member times', 'HMGET',
      unpack(names))
    for i = 1, #names do
      if values[i] then
        accs[i] = fold(accs[i], values[i])
      end
    end
  end
  for i, j in ipairs(which) do
    local score, subs, time = folded(accs[i])
    entries[j] = score and {score, subs, time} or false
  end
end

-- Writes members' places (entries[j]: {score, subscores, time}, or false:
-- off it) in the window whose keys start with keys, a command per key and
-- kind; was[j], what its times hash holds for members[j] (false: nothing;
-- was nil: read with an HMGET).
local function place_many(keys, members, entries, was)
  was = was or call('HMGET', keys .. 't', unpack(members))
  local zrem, zadd, hset, hdel = {}, {}, {}, {}
  for j, member in ipairs(members) do
    local e, old = entries[j], was[j] or nil
    local value
    if e then
      value = e[2] .. e[3] .. spack('>i8', ascending and e[1] or -e[1])
    end
    if value ~= old then
      if old then
        zrem[#zrem + 1] = sub(old, 1, PREFIX_LEN) .. member
      end
      if value then
        zadd[#zadd + 1] = ascending and e[1] or -e[1]
        zadd[#zadd + 1] = e[2] .. e[3] .. member
        hset[#hset + 1] = member
        hset[#hset + 1] = value
      else
        hdel[#hdel + 1] = member
      end
    end
  end
  call_with('ZREM', keys .. 'z', zrem)
  call_with('ZADD', keys .. 'z', zadd)
  call_with('HDEL', keys .. 't', hdel)
  call_with('HSET', keys .. 't', hset)
end

-- At the call's start, before any write: the window's state and whether
-- this call's period is in it; the types of the keys it may write.
window_open = function()
  window_on = false
  if wcombine == '' or count == 0 then
    return
  end
  local tag_end = string.find(zkey, '}:', 1, true) + 1
  wbase = sub(zkey, 1, tag_end)
  wlabel = sub(zkey, tag_end + 3, -3)
  local state = call_on(wbase .. 'w', 'hash', 'window state', 'HMGET', 's',
    'n', 'e')
  wserved, wserved_set = labels_of(state[1])
  wnext, wnext_set = labels_of(state[2])
  wexpire = state[3]
  in_served, in_next = wserved_set[wlabel], wnext_set[wlabel]
  window_on = in_served or in_next
  if not window_on then
    return
  end
  wkeys, xkeys = wbase .. 'p:' .. WINDOW .. ':', wbase .. 'p:' .. NEXT .. ':'
  wserved, wnext = times_keys(wserved), times_keys(wnext)
  -- The keys' types; a window's keys that do not exist yet (the roll left
  -- it empty, or its last member went) get the window's expiry when this
  -- call makes them.
  wfresh = false
  for _, keys in ipairs({in_served and wkeys, in_next and xkeys}) do
    if keys then
      for _, kt in ipairs({{'z', 'zset', 'window scores'},
          {'t', 'hash', 'window times'}}) do
        local found = call('TYPE', keys .. kt[1]).ok
        if found ~= 'none' and found ~= kt[2] then
          damaged(keys .. kt[1], found, kt[2], kt[3])
        end
        wfresh = wfresh or found == 'none'
      end
    end
  end
  wmembers, wentry, wwas, wagain = {}, {}, {}, {}
end

local function note(member)
  if wwas[member] == nil then
    wmembers[#wmembers + 1] = member
    wwas[member] = false
    if in_served then
      local v = call('HGET', wkeys .. 't', member)
      if v then
        wwas[member] = v
        wentry[member] = {entry_of(v)}
      else
        wentry[member] = false
      end
    end
  end
end

-- An update moved member from old (nil: not on the period) to new with
-- subscores new_subs at time (old_subs: its subscores before). Returns an
-- error text if the window's total would leave the range (nothing is
-- written yet), else nil.
window_apply = function(member, old, old_subs, new, new_subs, time)
  note(member)
  if not in_served or wagain[member] then
    wagain[member] = true
    return nil
  end
  local e = wentry[member]
  if wcombine == 'sum' then
    -- The window's time is its latest entry's: exact while this one is
    -- the latest; else computed again.
    if (e and before(time, e[3])) or (not e and old) then
      wagain[member] = true
      return nil
    end
    local total = (e and e[1] or 0) + new - (old or 0)
    if total > LIMIT or total < -LIMIT then
      return format('RANK_INVALID value: the window total %d + %d is ' ..
        'outside -%d..%d', e and e[1] or 0, new - (old or 0), LIMIT, LIMIT)
    end
    wentry[member] = {total, new_subs, time}
    return nil
  end
  -- best: an entry that got better can only raise the window's best; one
  -- that got worse (a SET, a negative INCREMENT) may have been it.
  if old and better(old, old_subs, new, new_subs) or (not e and old) then
    wagain[member] = true
  elseif not e or better(new, new_subs, e[1], e[2]) then
    wentry[member] = {new, new_subs, time}
  elseif new == e[1] and new_subs == e[2] and before(time, e[3]) then
    e[3] = time
  end
  return nil
end

-- The member left this call's period: computed again from its periods.
window_removed = function(member)
  note(member)
  wagain[member] = true
end

-- Every member of a batch of SETs: computed again.
window_all = function(members)
  for _, member in ipairs(members) do
    window_removed(member)
  end
end

-- After the call's writes of its period: each member's place in the
-- windows.
window_flush = function()
  if #wmembers == 0 then
    wmembers, wentry, wwas, wagain = nil
    return
  end
  if in_served then
    local entries, was, again = {}, {}, {}
    for j, member in ipairs(wmembers) do
      was[j] = wwas[member]
      if wagain[member] then
        again[#again + 1] = j
      else
        entries[j] = wentry[member]
      end
    end
    if #again > 0 then
      combine_many(wmembers, again, wserved, entries)
    end
    place_many(wkeys, wmembers, entries, was)
  end
  if in_next then
    local all, entries = {}, {}
    for j = 1, #wmembers do
      all[j] = j
    end
    combine_many(wmembers, all, wnext, entries)
    place_many(xkeys, wmembers, entries)
  end
  if wfresh and wexpire then
    for _, keys in ipairs({in_served and wkeys, in_next and xkeys}) do
      if keys then
        call('PEXPIREAT', keys .. 'z', wexpire, 'NX')
        call('PEXPIREAT', keys .. 't', wexpire, 'NX')
      end
    end
  end
  wmembers, wentry, wwas, wagain = nil
end

-- The roll: keys {rk:{board}:w}; args: the board's combination (sum or
-- best), order, prefix length, the labels of the window wanted (newest
-- first, comma-separated), the start of its newest period (Unix ms), when
-- its keys expire (Unix ms), and the most members to place in this call.
-- Returns {'done', labels served} or {'more', labels being built}.
local function roll(keys, args)
  local skey = keys[1]
  wbase = sub(skey, 1, -2)
  wcombine, ascending = args[1], args[2] == 'asc'
  PREFIX_LEN = tonumber(args[3])
  local target, start, expire_at = args[4], tonumber(args[5]), args[6]
  local budget = tonumber(args[7])
  wkeys, xkeys = wbase .. 'p:' .. WINDOW .. ':', wbase .. 'p:' .. NEXT .. ':'
  local state = call_on(skey, 'hash', 'window state', 'HMGET', 's', 'hs',
    'n', 'ns', 'src', 'c')
  local served, served_start, next_, next_start, src, cursor =
    state[1], tonumber(state[2]), state[3], tonumber(state[4]), state[5],
    state[6]
  for _, k in ipairs({wkeys, xkeys}) do
    expect(k .. 'z', 'zset', 'window scores')
    expect(k .. 't', 'hash', 'window times')
  end
  local registry = wbase .. 'k'
  expect(registry, 'zset', 'periods')
  if next_ and next_ ~= target and next_start < start then
    -- A period ended while the next window was built: build the newer.
    call('UNLINK', xkeys .. 'z', xkeys .. 't')
    next_ = nil
  end
  if not next_ then
    if served == target or (served_start and served_start >= start) then
      return {'done', served or ''}
    end
    -- Start: the members of the window served, and of each period that
    -- enters it.
    local _, had = labels_of(served)
    local sources = {}
    if served then
      sources[1] = WINDOW
    end
    for _, label in ipairs((labels_of(target))) do
      if not had[label] then
        sources[#sources + 1] = label
      end
    end
    call('UNLINK', xkeys .. 'z', xkeys .. 't')
    next_, next_start, src, cursor = target, start,
      table.concat(sources, ','), '0'
    call('ZADD', registry, expire_at, NEXT)
  end
  local labels, next_set = labels_of(next_)
  local keys_next = times_keys(labels)
  -- The periods the two windows do not share: a member of the window
  -- served with an entry in none of them has the same place in the next
  -- one, copied from its value there. A chunk's members are read and
  -- written with a command per key (HMGET, ZADD, HSET), not per member: a
  -- roll of 1M members cost Redis about 18 µs a member one command a
  -- member at a time.
  local served_list, served_set = labels_of(served)
  local differ = {}
  for _, label in ipairs(served_list) do
    if not next_set[label] then
      differ[#differ + 1] = wbase .. 'p:' .. label .. ':t'
    end
  end
  for _, label in ipairs(labels) do
    if not served_set[label] then
      differ[#differ + 1] = wbase .. 'p:' .. label .. ':t'
    end
  end
  while budget > 0 and src ~= '' do
    local first = string.match(src, '^[^,]+')
    local hash = (first == WINDOW and wkeys or wbase .. 'p:' .. first .. ':') ..
      't'
    local r = call_on(hash, 'hash', 'member times', 'HSCAN', cursor, 'COUNT',
      budget)
    cursor = r[1]
    local fields = r[2]
    local members, again, entries = {}, {}, {}
    for i = 2, #fields, 2 do
      members[i / 2] = fields[i - 1]
    end
    if #members > 0 then
      -- A member of the window served with an entry in none of the
      -- periods that leave or enter keeps its place there (its value);
      -- the others are computed from the next window's periods.
      local moved = {}
      if first == WINDOW then
        for _, key in ipairs(differ) do
          local has = call_on(key, 'hash', 'member times', 'HMGET',
            unpack(members))
          for j = 1, #members do
            moved[j] = moved[j] or has[j]
          end
        end
      end
      for j = 1, #members do
        if first == WINDOW and not moved[j] then
          entries[j] = {entry_of(fields[2 * j])}
        else
          again[#again + 1] = j
        end
      end
      if #again > 0 then
        combine_many(members, again, keys_next, entries)
      end
      place_many(xkeys, members, entries)
    end
    budget = budget - #members - 1
    if cursor == '0' then
      src = sub(src, #first + 2)
    end
  end
  if src ~= '' then
    call('HSET', skey, 'n', next_, 'ns', next_start, 'src', src, 'c', cursor,
      'e', expire_at)
    call('PEXPIREAT', skey, expire_at)
    call('PEXPIREAT', xkeys .. 'z', expire_at)
    call('PEXPIREAT', xkeys .. 't', expire_at)
    return {'more', next_}
  end
  -- The swap: the next window becomes the one served, in this call; the
  -- old one is freed in the background.
  local old = wbase .. 'p:window-old:'
  for _, suffix in ipairs({'z', 't'}) do
    if call('EXISTS', wkeys .. suffix) == 1 then
      call('RENAME', wkeys .. suffix, old .. suffix)
    end
    if call('EXISTS', xkeys .. suffix) == 1 then
      call('RENAME', xkeys .. suffix, wkeys .. suffix)
      call('PEXPIREAT', wkeys .. suffix, expire_at)
    end
  end
  call('UNLINK', old .. 'z', old .. 't')
  call('HSET', skey, 's', next_, 'hs', next_start, 'e', expire_at)
  call('HDEL', skey, 'n', 'ns', 'src', 'c')
  call('PEXPIREAT', skey, expire_at)
  call('ZREM', registry, NEXT)
  call('ZADD', registry, 'GT', expire_at, WINDOW)
  call('PEXPIREAT', registry, expire_at, 'NX')
  call('PEXPIREAT', registry, expire_at, 'GT')
  return {'done', next_}
end

redis.register_function(FUNCTION_NAME .. '_roll', function(keys, args)
  sub, byte = string.sub, string.byte
  call, error_reply, tonumber, format, floor, spack, sunpack, unpack, pcall,
    type = builtins()
  return roll(keys, args)
end)
