-- Reports the remaining TTL of the lock if it still holds our token.
-- KEYS[1] lock key; ARGV[1] token.
-- Returns the TTL in milliseconds, or -2 when the lock is not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -2
end
return redis.call('PTTL', KEYS[1])
