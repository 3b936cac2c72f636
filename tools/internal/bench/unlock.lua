-- Compare-and-delete: releases the lock only if it still holds our token.
-- KEYS[1] = lock:quota:{m}; ARGV[1] = token. Returns 1 if released, 0 if not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
