-- prelude.lua: what every script of rankd shares; the build puts it in
-- front of each of them (src/store/embed.cmake). Try a script in redis-cli with
-- both: redis-cli EVAL "$(cat prelude.lua update.lua)" ...

-- The string functions the scripts call for each member, as locals: a
-- global's costs two table lookups a call (bench/README.md of 4968f11).
local sub, byte = string.sub, string.byte

-- a < b bytewise, as Redis orders members of equal score (Lua's own string
-- comparison follows the server's locale).
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Damaged data: key holds a value of another type than rankd keeps there
-- (what: its role). Stops the script with an error reply rankd reports as
-- such; scripts call it before their first write, so nothing changes.
local function damaged_text(key, found, want, what)
  return 'RANK_DAMAGED key ' .. key .. ' holds a ' .. found ..
    ' where rankd keeps a ' .. want .. ' (' .. what .. ')'
end

local function damaged(key, found, want, what)
  error({err = damaged_text(key, found, want, what)})
end

-- redis.call on key, but a key of the wrong type names the key and what
-- it holds instead of failing on a line of the script.
local function call_on(key, want, what, command, ...)
  local r = redis.pcall(command, key, ...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 9) == 'WRONGTYPE' then
      damaged(key, redis.call('TYPE', key).ok, want, what)
    end
    error(r)
  end
  return r
end

-- Refuses a key that holds another type than want (absent is fine): for
-- keys a script will write without having read them first.
local function expect(key, want, what)
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= want then
    damaged(key, found, want, what)
  end
end
