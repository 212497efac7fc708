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
-- Returns the value deleted (a marker names the sub-buckets to delete
-- next), or nil when there was none or it was full again: a bucket's key
-- outlives its TAT by up to 2 ms (PXAT rounds up to the ms, and Redis
-- expires a key only once that ms is past), and the embedded backend
-- answers such a bucket as none.
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
if istat(v) then
  redis.call('DEL', KEYS[1])
  local t = redis.call('TIME')
  -- Now in ns, 19 digits as a TAT is: equal-length digit strings compare
  -- as numbers, where the number itself is past a double's 2^53.
  if v == '0' or v <= t[1] .. string.format('%06d', t[2]) .. '000' then
    return false
  end
  return v
end
local base, untilms, lapse, tags = string.match(v, '^~(%d+):(%d+):(%d+):[%da-z]+:([%da-z,]+)!?$')
if untilms and #untilms <= 13 and istat(base) and istat(lapse) and
    byte(tags, 1) ~= 44 and byte(tags, -1) ~= 44 and not find(tags, ',,', 1, true) and fewtags(tags) then
  redis.call('DEL', KEYS[1])
  return v
end
return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
