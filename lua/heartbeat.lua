-- sluice instance heartbeat: announce this instance and count live ones,
-- on the shard's clock so that instances on drifting hosts agree.
--
-- KEYS[1]  a sorted set: member = instance ID, score = its expiry (ms)
-- ARGV[1]  this instance's ID
-- ARGV[2]  how long the announcement lives, in ms
--
-- Returns the number of live instances, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return redis.call('ZCARD', KEYS[1])
