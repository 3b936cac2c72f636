-- Deletes the lock if it still holds our token, and announces the release so
-- that waiters need not poll.
-- KEYS[1] lock key; ARGV[1] token; ARGV[2] release channel.
-- Returns 1 when deleted, 0 when the lock is not ours (nothing is touched).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
