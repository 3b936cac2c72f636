-- Hydrates a missing quota hash from merchant_balance, fenced by the merchant
-- lock: the same write as the worker's own hydration (internal/deduct), done
-- early. A hash without remain is missing; leftover p: fields go with it
-- (merchant_balance does not count them).
-- KEYS[1] quota hash; KEYS[2] merchant lock (same {merchant} hash slot).
-- ARGV[1] our lock token; ARGV[2] remain (credited - debited);
-- ARGV[3] ver (the time in microseconds, so a re-created hash never repeats an
-- earlier ver).
-- Returns 1 when written; -1 when the lock is not ours; -2 when remain exists
-- (someone loaded it first: it is not ours to overwrite).
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return -1
end
if redis.call('HEXISTS', KEYS[1], 'remain') == 1 then
  return -2
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'remain', ARGV[2], 'ver', ARGV[3])
return 1
