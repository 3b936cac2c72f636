-- Release a worker-ID lease if it is still ours, leaving behind the newest
-- timestamp actually used (so the next holder need not wait out our TTL).
-- KEYS[1] lease key, KEYS[2] high-water-mark hash (same hash slot)
-- ARGV[1] holder value (JSON with token), ARGV[2] high-water mark to leave (Unix ms),
-- ARGV[3] token
-- Returns 1 when released, 0 when the lease was not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'ms', ARGV[2], 'token', ARGV[3])
redis.call('DEL', KEYS[1])
return 1
