-- Renew a worker-ID lease if it is still ours, and raise the high-water mark
-- to cover every timestamp the holder may use until the new expiry.
-- KEYS[1] lease key, KEYS[2] high-water-mark hash (same hash slot)
-- ARGV[1] holder value (JSON with token), ARGV[2] TTL ms,
-- ARGV[3] holder's clock (Unix ms), ARGV[4] token
-- Returns the high-water mark (Unix ms, as a string), or '' when not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return ''
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local old = tonumber(redis.call('HGET', KEYS[2], 'ms') or '0')
local hwm = math.max(old, tonumber(ARGV[3]) + tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], 'ms', string.format('%.0f', hwm), 'token', ARGV[4])
return string.format('%.0f', hwm)
