-- Acquire a worker-ID lease, never taking it over from a live holder.
-- KEYS[1] lease key, KEYS[2] high-water-mark hash (same hash slot, no TTL)
-- ARGV[1] holder value (JSON with token), ARGV[2] TTL ms,
-- ARGV[3] acquirer's clock (Unix ms), ARGV[4] token
-- Returns {0, holder value, pttl} when held, or
-- {1, previous high-water mark, token that wrote it, new high-water mark}.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}
end
local old = tonumber(redis.call('HGET', KEYS[2], 'ms') or '0')
local by = redis.call('HGET', KEYS[2], 'token') or ''
local hwm = math.max(old, tonumber(ARGV[3])) + tonumber(ARGV[2])
redis.call('HSET', KEYS[2], 'ms', string.format('%.0f', hwm), 'token', ARGV[4])
return {1, string.format('%.0f', old), by, string.format('%.0f', hwm)}
