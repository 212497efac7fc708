-- sluice bucket reset: delete one bucket, atomically, and nothing that is
-- not a bucket.
--
-- KEYS[1] the bucket. What is sluice's, as throttle.lua and split.lua
-- read it (TestForgedValuesAgree): a TAT, "0" or 19 digits no more than
-- int64's maximum; or a split marker '~<TAT>:<until>:<TAT>:<gen>:<tags>',
-- until 1 to 13 digits, gen and each of the 1 to 16 comma-separated tags
-- [0-9a-z]+, the tags with an optional trailing '!'. Any other string is
-- not sluice's and is left as it is, answered WRONGTYPE as THROTTLE
-- answers it. A key of another type answers Redis's WRONGTYPE.
--
-- Returns the bucket deleted, or nil when there was none or it was full
-- again: a bucket's key outlives its TAT by up to 2 ms (PXAT rounds up to
-- the ms, and Redis expires a key only once that ms is past), and the
-- embedded backend answers such a bucket as none. A marker is returned
-- as {marker, 1 or 0}: the marker names the sub-buckets to delete next,
-- and 1 says its own state is not full (while the split holds its base,
-- which a missing sub-bucket starts at; once lapsed, the bucket it lapsed
-- into), so the key was not full whatever its sub-buckets hold; with 0,
-- only a sub-bucket deleted says it was.
local find, byte = string.find, string.byte
local function istat(x)
  return x == '0' or (#x == 19 and not find(x, '%D') and (byte(x, 1) < 57 or x <= '9223372036854775807'))
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

local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return v
end
if not v then
  return false
end
local t = redis.call('TIME')
-- Now in ns, 19 digits as a TAT is: equal-length digit strings compare
-- as numbers, where the number itself is past a double's 2^53.
local now = t[1] .. string.format('%06d', t[2]) .. '000'
local function full(tat)
  return tat == '0' or tat <= now
end
if istat(v) then
  redis.call('DEL', KEYS[1])
  if full(v) then
    return false
  end
  return v
end
local base, untilms, lapse, tags = string.match(v, '^~(%d+):(%d+):(%d+):[%da-z]+:([%da-z,]+)!?$')
if untilms and #untilms <= 13 and istat(base) and istat(lapse) and
    byte(tags, 1) ~= 44 and byte(tags, -1) ~= 44 and not find(tags, ',,', 1, true) and fewtags(tags) then
  redis.call('DEL', KEYS[1])
  local own = base
  if tonumber(untilms) * 1000 <= tonumber(t[1]) * 1000000 + tonumber(t[2]) then
    own = lapse
  end
  if full(own) then
    return {v, 0}
  end
  return {v, 1}
end
return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
