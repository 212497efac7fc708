-- sluice hot-key split: turn a parent bucket into a split marker, renew
-- one, or end one, on the shard that owns KEYS[1]. Every sluice that calls
-- the parent while the marker holds is told to use the sub-buckets instead
-- (see throttle.lua), so all instances count a split key in the same
-- places.
--
-- KEYS[1]  the parent bucket
-- ARGV[1]  the sub-buckets' hash tags wanted, comma-separated; "" ends the
--          split
-- ARGV[2]  how long the split holds, in ms (not read when ending)
-- ARGV[3]  -1, or the sub-buckets' mean time until full, in µs, as read
--          from them now
-- ARGV[4]  optional: how many of the tags a new split takes (none or 0:
--          all of them). A live split keeps its own number of tags
--          whatever this says: the instance that makes a split decides
--          it, every other follows, so instances that disagree never
--          split one key twice. -1: make no new split and renew no live
--          one; only take up the split of ARGV[5] (an instance that
--          follows a split it did not make).
-- ARGV[5]  optional: the split (gen) the caller decided the key by. If it
--          lapsed while this shard could not renew it (it was down) and
--          nothing has taken from the bucket since, it is taken up again:
--          renewed as it was, same sub-buckets, from the state they reached
--          meanwhile (ARGV[3]), so that the key is counted in one set of
--          sub-buckets across the outage. A live split of another name
--          takes nothing of ARGV[3] and ARGV[6] (they were read of this
--          one's sub-buckets), and is not ended.
-- ARGV[6]  optional, with ARGV[3] >= 0: the fullest sub-bucket's time
--          until full, in µs, which becomes the base (none: ARGV[3]). The
--          mean is right for the lapse, which holds all the sub-buckets'
--          tokens in one bucket; as the base it would make the sub-buckets
--          that are missing (never taken from, or full and expired) as
--          empty as the mean, and each renewal of a split used unevenly
--          would take tokens that were never spent.
--
-- The marker is '~<base>:<until>:<lapse>:<gen>:<tags>', TATs in ns (19
-- digits, or 0 for full) and until in ms on this shard's clock:
--   base   the fullest a sub-bucket may be (a missing one starts there):
--          the bucket's own state at the split, then the fullest
--          sub-bucket's state at each renewal;
--   until  when the split lapses;
--   lapse  the bucket the key is again once the split lapses: as empty as
--          the sub-buckets were when last read, as of until. The
--          sub-buckets decide until then, and a key that stops being hot
--          while it is still asked keeps them about that empty, so a lapse
--          admits no burst; a key that went idle gets its tokens back a
--          little late instead;
--   gen    the split's own name, part of every sub-bucket's key, so that
--          no split inherits another's sub-buckets;
--   tags   the sub-buckets' hash tags, with a trailing '!' once the split
--          is closing.
-- A split's sub-buckets never change while it holds: no instance may count
-- a key in two sets of them. A renewal whose tags do not start with the
-- split's, because it can use fewer (it saw a call too big for them) or
-- others (the slot map moved), closes the split instead: it lapses when it
-- was to and the next split, named anew, takes the tags wanted, with no
-- more of them than the split before had, so that instances wanting
-- different numbers do not take turns.
-- Splitting a bucket keeps its state as base, and as lapse as of the
-- split's end, so a split admits no burst, even one never renewed. The
-- key expires when the split and both states are
-- over, never earlier; a split that is not closing is kept a minute past
-- its end (as the bucket it lapsed into, which a take turns into a plain
-- bucket), so that it can be taken up after an outage of this shard.
--
-- Returns {2, marker, ms it holds}, the answer throttle.lua gives; when
-- ending a split, 1 if there was a live one, else 0; with ARGV[4] -1 and
-- no split to go on with, 0.
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowms = math.floor(nowus / 1000)
local ttl, ttf = tonumber(ARGV[2]), tonumber(ARGV[3])
local full = tonumber(ARGV[6] or ARGV[3])
local want = tonumber(ARGV[4] or '0')
-- How long a split that is not closing is kept past its end, in ms.
local keep = 60000

-- The ms instant of a stored TAT, rounded up.
local function ms(tat)
  if tat == '0' then return 0 end
  local m = tonumber(string.sub(tat, 1, -7))
  if tonumber(string.sub(tat, -6)) > 0 then m = m + 1 end
  return m
end

-- What is sluice's, as throttle.lua reads it (TestForgedValuesAgree): a
-- TAT, "0" or 19 digits no more than int64's maximum; or a marker as
-- above, until 1 to 13 digits, gen and each of 1 to 16 tags [0-9a-z]+.
local function istat(x)
  return x == '0' or (#x == 19 and not string.find(x, '%D') and (string.byte(x, 1) < 57 or x <= '9223372036854775807'))
end

-- A marker names at most 16 sub-buckets (router.MaxSplit): no split has
-- more, and a forged one naming thousands would make one key as many.
local function fewtags(tags)
  local at = 0
  for _ = 1, 16 do
    at = string.find(tags, ',', at + 1, true)
    if not at then return true end
  end
  return false
end

local function tat(us)
  return string.format('%.0f000', us)
end

-- A stored state as of untilms: as far from full then as it is now. A
-- split that lapses unrenewed lapses into it; its sub-buckets spent the
-- refill meanwhile, which the state itself would grant again.
local function asof(state, untilms)
  if state == '0' then return state end
  local us = tonumber(string.sub(state, 1, -4))
  if us <= nowus then return '0' end
  return string.format('%.0f', us + untilms * 1000 - nowus) .. string.sub(state, -3)
end

-- A state as sluice's (istat): one a shift took before 2001 or below 0
-- (only a forged marker's can) is past, so full; one past int64's
-- maximum is that maximum. Every state a marker is written with is read
-- back by the other scripts.
local function fit(x)
  if istat(x) then return x end
  if string.byte(x, 1) == 45 or #x < 19 then return '0' end
  return '9223372036854775807'
end

local function store(base, untilms, lapse, gen, tags)
  base, lapse = fit(base), fit(lapse)
  local marker = '~' .. base .. ':' .. string.format('%.0f', untilms) .. ':' .. lapse .. ':' .. gen .. ':' .. tags
  local at = math.max(untilms, ms(base), ms(lapse))
  if string.sub(tags, -1) ~= '!' then at = math.max(at, untilms + keep) end
  redis.call('SET', KEYS[1], marker, 'PXAT', string.format('%.0f', at))
  return marker
end

local s = redis.pcall('GET', KEYS[1])
if type(s) == 'table' and s.err then
  return redis.error_reply(s.err)
end
local base, lapse, cap = '0', '0', nil
if s and string.byte(s, 1) == 126 then
  local old, gen, tags, closing
  base, old, lapse, gen, tags, closing = string.match(s, '^~(%d+):(%d+):(%d+):([%da-z]+):([%da-z,]+)(!?)$')
  if not base or #old > 13 or not istat(base) or not istat(lapse) or
      string.byte(tags, 1) == 44 or string.byte(tags, -1) == 44 or string.find(tags, ',,', 1, true) or not fewtags(tags) then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  old = tonumber(old)
  if ARGV[5] and ARGV[5] ~= '' and ARGV[5] ~= gen then
    -- The caller read another split's sub-buckets (it has not met this
    -- one yet): they say nothing of this one's, and written here they
    -- would make it as full as those are. Nor is this split the one it
    -- means to end.
    if ARGV[1] == '' then
      return 0
    end
    ttf = -1
  end
  local fits = string.sub(ARGV[1] .. ',', 1, #tags + 1) == tags .. ','
  if old > nowms and want < 0 then
    return {2, s, old - nowms}
  end
  local takeup = ARGV[1] ~= '' and closing == '' and gen == ARGV[5] and fits
  if old > nowms or takeup then
    if ARGV[1] == '' or closing == '!' or not fits then
      -- End or close it: it lapses when it was to, as empty then as the
      -- sub-buckets are now.
      if ttf >= 0 then
        base, lapse = tat(nowus + full), tat(old * 1000 + ttf)
      end
      local marker = store(base, old, lapse, gen, tags .. '!')
      if ARGV[1] == '' then
        return 1
      end
      return {2, marker, old - nowms}
    end
    -- Renew it, for the tags it has.
    local untilms = nowms + ttl
    if ttf >= 0 then
      base, lapse = tat(nowus + full), tat(untilms * 1000 + ttf)
    elseif lapse ~= '0' then
      -- The state read before, still as of the (new) lapse.
      lapse = string.format('%.0f', tonumber(string.sub(lapse, 1, -7)) + untilms - old) .. string.sub(lapse, -6)
    end
    return {2, store(base, untilms, lapse, gen, tags), ttl}
  end
  if ARGV[1] == '' or want < 0 then
    return 0
  end
  -- Lapsed: a new split starts from the bucket it lapsed into.
  base, lapse = lapse, asof(lapse, nowms + ttl)
  local n = 0
  for _ in string.gmatch(tags, '[^,]+') do n = n + 1 end
  cap = n
elseif ARGV[1] == '' or want < 0 then
  return 0
elseif s then
  if not istat(s) then
    return redis.error_reply('WRONGTYPE key holds a value that is not a sluice bucket')
  end
  base, lapse = s, asof(s, nowms + ttl)
end

local tags = ARGV[1]
if want <= 0 or (cap and cap < want) then want = cap end
if want then
  local kept = {}
  for tag in string.gmatch(tags, '[^,]+') do
    if #kept < want then kept[#kept + 1] = tag end
  end
  tags = table.concat(kept, ',')
end
return {2, store(base, nowms + ttl, lapse, string.format('%x', nowms), tags), ttl}
