-- Deletes a merchant's quota hash, if the caller still holds the merchant
-- lock, so that the next deduction hydrates it from MySQL.
--
-- KEYS[1] quota:{m}   KEYS[2] lock:quota:{m}
-- ARGV[1] lock token
--
-- Returns {'lock'} or {'ok', keys deleted}.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
return {'ok', redis.call('DEL', KEYS[1])}
