-- Loads a merchant's balance from MySQL into a missing quota hash, if the
-- caller still holds the merchant lock. An existing remain is left alone.
-- Leftover p: fields of a hash without remain are dropped with it: the MySQL
-- balance does not include them, so they must not be reused.
--
-- KEYS[1] quota:{m}   KEYS[2] lock:quota:{m}
-- ARGV[1] lock token  ARGV[2] remain (credited - debited)  ARGV[3] ver
-- ARGV[4] the overdraft policy's floor ('0' reject, N, 'inf' overage)
--
-- Returns {'lock'}, {'ok', 1} (hydrated) or {'ok', 0} (already present).
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
if redis.call('HEXISTS', KEYS[1], 'remain') == 1 then
  return {'ok', 0}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'remain', ARGV[2], 'ver', ARGV[3])
if ARGV[4] ~= '0' then
  redis.call('HSET', KEYS[1], 'floor', ARGV[4])
end
return {'ok', 1}
