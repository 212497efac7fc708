-- sluice hot-key split: turn a parent bucket into a split marker, or renew
-- one, on the shard that owns KEYS[1]. Every sluice that calls the parent
-- while the marker holds is told to use the sub-buckets instead (see
-- throttle.lua), so all instances count a split key in the same places.
--
-- KEYS[1]  the parent bucket
-- ARGV[1]  the sub-buckets' hash tags, comma-separated; "" ends the split:
--          it lapses when it was to, into a bucket as empty then as the
--          sub-buckets are now (ARGV[3]), since they keep deciding until
--          it lapses, and no burst must follow
-- ARGV[2]  how long the split holds, in ms
-- ARGV[3]  -1, or the sub-buckets' mean time until full, in µs: the state
--          the parent has when the split lapses, and sub-buckets that are
--          missing start from
--
-- The marker is '~<base>:<until>:<tags>': base is the TAT (ns, 19 digits,
-- or 0 for full) that missing sub-buckets start from, until the instant
-- (ms, on this shard's clock) the split lapses. Splitting a bucket keeps
-- its state as the base, so a split admits no burst. The key expires when
-- both the split and the base are over, never earlier.
--
-- Returns {2, marker, ms it holds}, the answer throttle.lua gives; when
-- ending a split, 1 if there was a live one, else 0.
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowms = math.floor(nowus / 1000)
local ttl, ttf = tonumber(ARGV[2]), tonumber(ARGV[3])

local s = redis.pcall('GET', KEYS[1])
if type(s) == 'table' and s.err then
  return redis.error_reply(s.err)
end
local base = '0'
if s and string.byte(s, 1) == 126 then
  local old
  base, old = string.match(s, '^~(%d+):(%d+):')
  if not base then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  if ARGV[1] == '' then
    old = tonumber(old)
    if old <= nowms or ttf < 0 then
      return 0
    end
    local tags = string.match(s, '^~%d+:%d+:(.+)$')
    base = string.format('%.0f000', old * 1000 + ttf)
    redis.call('SET', KEYS[1], '~' .. base .. ':' .. string.format('%.0f', old) .. ':' .. tags,
      'PXAT', string.format('%.0f', old + math.ceil(ttf / 1000)))
    return 1
  end
elseif ARGV[1] == '' then
  return 0
elseif s then
  if #s ~= 19 or not string.find(s, '^%d+$') then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  base = s
end
if ttf >= 0 then
  base = '0'
  if ttf > 0 then
    base = string.format('%.0f000', nowus + ttf)
  end
end

local untilms = nowms + ttl
local at = untilms
if base ~= '0' then
  -- The base's instant in ms, rounded up.
  local ms = tonumber(string.sub(base, 1, -7))
  if tonumber(string.sub(base, -6)) > 0 then ms = ms + 1 end
  if ms > at then at = ms end
end
local marker = '~' .. base .. ':' .. string.format('%.0f', untilms) .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], marker, 'PXAT', string.format('%.0f', at))
return {2, marker, ttl}
