-- sluice bucket reset: delete one bucket, atomically, and nothing that is
-- not a bucket.
--
-- KEYS[1] the bucket. A bucket's value is its TAT (19 digits), "0", or a
-- split marker ("~<digits>:<digits>:<digits>:...", split.lua); any other
-- string is not sluice's and is left as it is, answered WRONGTYPE as
-- THROTTLE answers it. A key of another type answers Redis's WRONGTYPE.
--
-- Returns the value deleted (a marker names the sub-buckets to delete
-- next), or nil when there was none or it was full again: a bucket's key
-- outlives its TAT by up to 2 ms (PXAT rounds up to the ms, and Redis
-- expires a key only once that ms is past), and the embedded backend
-- answers such a bucket as none.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return v
end
if not v then
  return false
end
if v == '0' or (#v == 19 and string.find(v, '^%d+$')) then
  redis.call('DEL', KEYS[1])
  local t = redis.call('TIME')
  -- Now in ns, 19 digits as a TAT is: equal-length digit strings compare
  -- as numbers, where the number itself is past a double's 2^53.
  if v == '0' or v <= t[1] .. string.format('%06d', t[2]) .. '000' then
    return false
  end
  return v
end
if string.find(v, '^~%d+:%d+:%d+:') then
  redis.call('DEL', KEYS[1])
  return v
end
return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
