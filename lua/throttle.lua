-- sluice token bucket: one step per bucket, atomically, on the shard that
-- owns the buckets. The arithmetic is router/bucket's (Go), line for line;
-- read that package for the units and why every value stays exact in
-- Lua's doubles.
--
-- A bucket is a string holding its theoretical arrival time (the instant
-- it is full again) in ns since the epoch, 19 digits; missing = full. It
-- may instead hold a split marker (split.lua): the key is hot and split
-- into sub-buckets, and the step answers the marker and the ms it holds
-- without taking. A marker past its time has lapsed back into a bucket
-- whose TAT is the marker's lapse state.
--
-- A step takes, for one bucket:
--   capacity C, in tokens;
--   U and V: one token refills every U/V µs (reduced; C*U <= 2^51,
--     V <= 2^40);
--   cost, in tokens; 0 peeks;
--   base: a split's base, as stored ("0": full), the fullest a sub-bucket
--     may be; a missing one starts from it. "" or none: no base.
--     "+<µs>": the base is that long from full, from now on this shard's
--     clock: the state a sub-bucket had where it was decided before, carried
--     to where it is decided now; written even when the step takes nothing;
--   n: how many calls of cost the step decides, in order, as n steps at
--     one instant would;
--   now, in µs: the shard's TIME unless a test gives its own.
-- It writes only when it takes tokens, with a PXAT of the instant the
-- bucket is full (in ms, rounded up, on the same clock as TIME), so an idle
-- bucket disappears and never earlier; a denial or a peek writes nothing,
-- but for a carried state ("+<µs>" base, below), which is written first.
--
-- One bucket, declared (keys of a slot being migrated must come this way,
-- so that MOVED and ASK work):
--   KEYS[1] the bucket; ARGV[1..4] C, U, V, cost; optional ARGV[5] base,
--   ARGV[6] n (1 by default), ARGV[7] now.
--   Returns {limited, remaining, retry_after_us, reset_after_us}, and for
--   n > 1 a fifth value: how many of the calls took their cost (the first
--   ones); limited, retry_after_us and the state are then the last call's.
--   A split bucket answers {2, marker, ms it holds}; a key that is not a
--   bucket, or a failed GET or SET, an error reply.
--
-- Many buckets on this node, in one call: no KEYS, and
--   ARGV[1] "2" (the format: this one);
--   then per bucket either its key and "=": the same numbers as the
--   bucket before (the common case: buckets of one limit and cost; two
--   ARGV a bucket cost the shard less to read than eight), or
--   key, C, U, V, cost, base ("" for none), n, now ("0": the shard's TIME).
--   Buckets are decided in order, so one that appears twice sees its first
--   step's write. The shard's TIME is read once for all.
--   Returns a flat array of 5 values per bucket, in order:
--     0 or 1 (limited), remaining, retry_after_us, reset_after_us, taken
--     2, marker, ms it holds, 0, 0                     (split)
--     3, error message, 0, 0, 0
--   The error is the one Redis gave the bucket's GET or SET (a key of a
--   slot not served here: "ERR Script attempted to access a non local key
--   in a cluster node"; "...while the cluster is down"; OOM, READONLY) or
--   WRONGTYPE for a key that is not a bucket; the step took nothing then,
--   and the call goes on. Nothing after the first write may raise: a
--   script's writes stay, so a raised error would lose the answers of the
--   buckets already decided. This script has no shebang on purpose: only
--   such scripts may touch undeclared keys of several slots (Redis 7).

local byte, sub, find, format = string.byte, string.sub, string.find, string.format
local pcall = redis.pcall
local wrongtype = 'WRONGTYPE key holds a value that is not a sluice bucket'

-- What is sluice's: a TAT, "0" or 19 digits no more than int64's maximum
-- (the ns Redis stores int-encoded); or a split marker
-- '~<TAT>:<until>:<TAT>:<gen>:<tags>', until 1 to 13 digits (ms), gen and
-- each of the 1 to 16 comma-separated tags [0-9a-z]+, the tags with an optional
-- trailing '!'. Anything else is WRONGTYPE. reset.lua and split.lua accept
-- exactly the same values, and lua.Marker the same markers
-- (TestForgedValuesAgree).
local maxtat = '9223372036854775807'
local function istat(x)
  return x == '0' or (#x == 19 and not find(x, '%D') and (byte(x, 1) < 57 or x <= maxtat))
end

-- A marker names at most 16 sub-buckets (router.MaxSplit): no split has
-- more, and a forged one naming thousands would make one key as many.
local function fewtags(tags)
  local at = 0
  for _ = 1, 16 do
    at = find(tags, ',', at + 1, true)
    if not at then return true end
  end
  return false
end

-- Every division is floor division of integers 0 <= x, 0 < y with
-- x + y < 2^53, written (x - x % y) / y, or its ceiling ((x + y - 1) ...):
-- Lua 5.1's % is x - floor(x/y)*y in C, and within that bound the double
-- quotient never rounds across an integer, so the result is exact. (The
-- bounds: C*U <= 2^51, V <= 2^40, now < 2^53 µs.) It is written out,
-- not called: a Lua function call, and math.floor's from Lua, cost more
-- than the rest of the arithmetic together.

-- step decides one bucket and returns the 5 values of a many call's reply.
local function step(key, c, u, v, cost, base, n, now)
  local s = pcall('GET', key)
  -- A table is an error; a string's s.err is string.err, nil. (Cheaper
  -- than a call of type(), as below for SET, whose reply is always a
  -- table, {ok} or {err}.)
  if s and s.err then
    return 3, s.err, 0, 0, 0
  end
  local nr = now % 1000
  local nowms = (now - nr) / 1000
  if s and byte(s, 1) == 126 then -- '~': a split marker
    local mbase, untilms, lapse, tags = string.match(s, '^~(%d+):(%d+):(%d+):[%da-z]+:([%da-z,]+)!?$')
    if not untilms or #untilms > 13 or not istat(mbase) or not istat(lapse) or
        byte(tags, 1) == 44 or byte(tags, -1) == 44 or find(tags, ',,', 1, true) or not fewtags(tags) then
      return 3, wrongtype, 0, 0, 0
    end
    local left = untilms - nowms
    if left > 0 then
      return 2, s, left, 0, 0
    end
    s = lapse
  end
  -- '' (no base, the common case) needs no call of byte.
  if base ~= '' and base and byte(base, 1) == 43 then -- '+': from now
    local full = now + tonumber(sub(base, 2))
    base = format('%d000', full)
    -- A carried state is written at once, taken from or not: a denial
    -- writes nothing, and the next call, which carries nothing, would
    -- find the bucket here as it was (refilled while it was decided
    -- elsewhere). A state from now on is full already: nothing to write.
    if full > now and (not s or (#s == 19 and s < base)) then
      local at = full + 999
      local w = pcall('SET', key, base, 'PXAT', format('%d', (at - at % 1000) / 1000))
      if w.err then
        return 3, w.err, 0, 0, 0
      end
    end
  end
  -- A sub-bucket is never fuller than its split's base: a missing one
  -- starts there, and one left from an earlier split, fuller than the key
  -- is now, is brought down to it. (Equal-length digit strings compare as
  -- numbers.)
  if base and #base == 19 and (not s or (#s == 19 and s < base)) then
    s = base
  end
  local tau = c * u
  local d = 0
  -- over: when a bucket left by another limit is emptier than this one
  -- can be, d is capped at tau and over is the time until full, in µs
  -- rounded up.
  local over = 0
  if s and s ~= '0' then
    -- A TAT in ns is 19 digits from 2001 to 2262 (int64's maximum, and
    -- Redis's int encoding); anything else is not ours ('9': byte 57).
    if #s ~= 19 or not find(s, '^%d+$') or (byte(s, 1) == 57 and s > maxtat) then
      return 3, wrongtype, 0, 0, 0
    end
    -- The µs part is a number below 2^53 (until 2255); the ns part is
    -- read byte by byte, which makes no string.
    local a = sub(s, 1, 16) - now
    local b1, b2, b3 = byte(s, 17, 19)
    local b = b1 * 100 + b2 * 10 + b3 - 5328 -- 5328: '0' is byte 48
    if a > 0 or (a == 0 and b > 0) then
      local bv = b * v
      bv = (bv - bv % 1000) / 1000
      if a > (tau - tau % v) / v or a * v + bv > tau then
        d = tau
        over = a
        if b > 0 then over = a + 1 end
      else
        d = a * v + bv
      end
    end
  end
  local full = over
  if cost > c then
    if over == 0 then full = (d + v - 1 - (d + v - 1) % v) / v end
    return 1, (tau - d - (tau - d) % u) / u, -1, full, 0
  end
  -- How many of the calls find their cost (a peek: all of them).
  local k = n
  if cost > 0 then
    local cu = cost * u
    local fit = (tau - d - (tau - d) % cu) / cu
    if fit < k then k = fit end
  end
  local nd = d + k * cost * u
  if k > 0 and cost > 0 then
    local a = (nd - nd % v) / v
    local b = (nd - a * v) * 1000 + v - 1
    b = (b - b % v) / v
    if b == 1000 then
      a, b = a + 1, 0
    end
    -- The full instant in ms: (now + nd/v µs) / 1000, rounded up, split so
    -- that now*v is never formed.
    local at = nr * v + nd + v * 1000 - 1
    at = nowms + (at - at % (v * 1000)) / (v * 1000)
    -- %d, not %.0f: the values are integers below 2^53, which C prints
    -- exactly as a long, at a fraction of the cost of a double.
    local w = pcall('SET', key, format('%d%03d', now + a, b), 'PXAT', format('%d', at))
    if w.err then
      return 3, w.err, 0, 0, 0
    end
  end
  if over == 0 then full = (nd + v - 1 - (nd + v - 1) % v) / v end
  local left = (tau - nd - (tau - nd) % u) / u
  if k < n then
    -- The first call that did not fit waits until its cost is there.
    local retry
    if over > 0 then
      retry = tau - cost * u
      retry = over - (retry - retry % v) / v
    else
      retry = nd + cost * u - tau + v - 1
      retry = (retry - retry % v) / v
    end
    return 1, left, retry, full, k
  end
  return 0, left, -1, full, k
end

if #KEYS > 0 then
  -- Arithmetic reads the numbers (a C call to tonumber costs more); a
  -- malformed one raises before anything is written.
  local n = 1
  if ARGV[6] then n = ARGV[6] + 0 end
  local now = ARGV[7]
  if now then
    now = now + 0
  else
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local code, x1, x2, x3, x4 = step(KEYS[1], ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5], n, now)
  if code == 3 then
    return redis.error_reply(x1)
  end
  if code == 2 then
    return {2, x1, x2}
  end
  if n > 1 then
    return {code, x1, x2, x3, x4}
  end
  return {code, x1, x2, x3}
end

-- ARGV is a global: a local is a register, not a lookup per bucket.
local argv = ARGV
-- Checked before the first write, so this may still raise: that every
-- bucket is two or eight ARGV, and the first eight.
local last = #argv
local i = 2
if argv[1] ~= '2' or argv[3] == '=' then
  i = 0
end
while i > 0 and i <= last do
  if argv[i + 1] == '=' then i = i + 2 else i = i + 8 end
end
if i ~= last + 1 then
  return redis.error_reply('ERR sluice: a many-bucket call takes "2", then per bucket its key and "=" or its key and 7 numbers')
end
-- The shard's clock, read before the first write: TIME once for all.
local clock
if last > 1 then
  local t = redis.call('TIME')
  clock = t[1] * 1000000 + t[2]
end
local out, j = {}, 0
-- A bucket's numbers are parsed with tonumber, which cannot raise.
local c, u, v, cost, base, n, now, ok
i = 2
while i <= last do
  local key = argv[i]
  if argv[i + 1] == '=' then
    i = i + 2
  else
    c, u, v, cost = tonumber(argv[i + 1]), tonumber(argv[i + 2]), tonumber(argv[i + 3]), tonumber(argv[i + 4])
    base, n, now = argv[i + 5], tonumber(argv[i + 6]), clock
    if argv[i + 7] ~= '0' then now = tonumber(argv[i + 7]) end
    ok = c and u and v and cost and n and now
    i = i + 8
  end
  if ok then
    out[j + 1], out[j + 2], out[j + 3], out[j + 4], out[j + 5] = step(key, c, u, v, cost, base, n, now)
  else
    out[j + 1], out[j + 2], out[j + 3], out[j + 4], out[j + 5] = 3, 'ERR sluice: a bucket\'s numbers are not numbers', 0, 0, 0
  end
  j = j + 5
end
return out
