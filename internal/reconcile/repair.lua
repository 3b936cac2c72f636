-- Compare-and-set repair of a merchant's quota hash, fenced by the merchant lock.
-- KEYS[1] quota hash; KEYS[2] merchant lock (same {merchant} hash slot).
-- ARGV[1] our lock token; ARGV[2] ver as read ('' when the hash had none);
-- ARGV[3] new remain; ARGV[4..] pending fields to delete.
-- Returns {'lock'} when the lock is not ours, {'ok', 0} when ver moved or the
-- hash is gone, {'ok', 1} when applied. Nothing is written unless every check
-- passes.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
local ver = redis.call('HGET', KEYS[1], 'ver')
if ver == false then
  if ARGV[2] ~= '' or redis.call('EXISTS', KEYS[1]) == 0 then
    return {'ok', 0}
  end
elseif ver ~= ARGV[2] then
  return {'ok', 0}
end
redis.call('HSET', KEYS[1], 'remain', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
for i = 4, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
return {'ok', 1}
