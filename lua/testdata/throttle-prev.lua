-- sluice token bucket: one step, atomically, on the shard that owns KEYS[1].
-- The arithmetic is router/bucket's (Go), line for line; read that package
-- for the units and why every value stays exact in Lua's doubles.
--
-- KEYS[1]  the bucket: a string holding its theoretical arrival time (the
--          instant it is full again) in ns since the epoch; missing = full
-- ARGV[1]  capacity C, in tokens
-- ARGV[2]  U and
-- ARGV[3]  V: one token refills every U/V µs (reduced; C*U <= 2^51, V <= 2^40)
-- ARGV[4]  cost, in tokens; 0 peeks
-- ARGV[5]  optional: a split's base, as stored ("0": full): the fullest a
--          sub-bucket may be. A missing one starts from it.
-- ARGV[6]  optional: n, how many calls of cost this step decides, in order,
--          as n steps at one instant would (1 by default)
-- ARGV[7]  optional: now in µs instead of the shard's TIME (tests only)
--
-- KEYS[1] may instead hold a split marker (split.lua): the key is hot and
-- split into sub-buckets, and the step answers {2, marker, ms it holds}
-- without taking. A marker past its time has lapsed back into a bucket
-- whose TAT is the marker's lapse state.
--
-- Returns {limited, remaining, retry_after_us, reset_after_us}, and for
-- n > 1 a fifth value: how many of the calls took their cost (the first
-- ones); limited, retry_after_us and the state are then the last call's.
-- It writes only when it takes tokens, with a PXAT of the instant the bucket is full
-- (in ms, rounded up, on the same clock as TIME), so an idle bucket
-- disappears and never earlier; a denial or a peek writes nothing.

-- floor(a/b) for integers below 2^53, corrected where the double quotient
-- rounds across an integer.
local function idiv(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then return q - 1 end
  if r >= b then return q + 1 end
  return q
end

local function cdiv(a, b)
  return idiv(a + b - 1, b)
end

local c, u, v, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now
local n = 1
if ARGV[6] then
  n = tonumber(ARGV[6])
end
if ARGV[7] then
  now = tonumber(ARGV[7])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local tau = c * u
local d = 0
-- over: when a bucket left by another limit is emptier than this one can
-- be, d is capped at tau and over is the time until full, in µs rounded up.
local over = 0
local s = redis.pcall('GET', KEYS[1])
if type(s) == 'table' and s.err then
  return redis.error_reply(s.err)
end
if s and string.byte(s, 1) == 126 then -- '~': a split marker
  local untilms, lapse = string.match(s, '^~%d+:(%d+):(%d+):')
  if not untilms then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  local left = tonumber(untilms) - idiv(now, 1000)
  if left > 0 then
    return {2, s, left}
  end
  s = lapse
end
-- A sub-bucket is never fuller than its split's base: a missing one starts
-- there, and one left from an earlier split, fuller than the key is now,
-- is brought down to it. (Equal-length digit strings compare as numbers.)
local base = ARGV[5]
if base and #base == 19 and (not s or (#s == 19 and s < base)) then
  s = base
end
if s == '0' then
  s = false
end
if s then
  -- A TAT in ns is 19 digits from 2001 to 2286; anything else is not ours.
  if #s ~= 19 or not string.find(s, '^%d+$') then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  local a = tonumber(string.sub(s, 1, -4)) - now
  local b = tonumber(string.sub(s, -3))
  if a > 0 or (a == 0 and b > 0) then
    if a > idiv(tau, v) or a * v + idiv(b * v, 1000) > tau then
      d = tau
      over = a
      if b > 0 then over = a + 1 end
    else
      d = a * v + idiv(b * v, 1000)
    end
  end
end

local function full(x)
  if over > 0 then return over end
  return cdiv(x, v)
end

local function reply(limited, x, retry, k)
  if n > 1 then
    return {limited, idiv(tau - x, u), retry, full(x), k}
  end
  return {limited, idiv(tau - x, u), retry, full(x)}
end

if cost > c then
  return reply(1, d, -1, 0)
end
-- How many of the calls find their cost (a peek: all of them).
local k = n
if cost > 0 then
  k = math.min(n, idiv(tau - d, cost * u))
end
local nd = d + k * cost * u
if k > 0 and cost > 0 then
  local a = idiv(nd, v)
  local b = cdiv((nd - a * v) * 1000, v)
  if b == 1000 then
    a, b = a + 1, 0
  end
  -- The full instant in ms: (now + nd/v µs) / 1000, rounded up, split so
  -- that now*v is never formed.
  local q = idiv(now, 1000)
  local at = q + cdiv((now - q * 1000) * v + nd, v * 1000)
  redis.call('SET', KEYS[1], string.format('%.0f%03d', now + a, b), 'PXAT', string.format('%.0f', at))
end
if k < n then
  -- The first call that did not fit waits until its cost is there.
  local retry = cdiv(nd + cost * u - tau, v)
  if over > 0 then retry = over - idiv(tau - cost * u, v) end
  return reply(1, nd, retry, k)
end
return reply(0, nd, -1, k)
