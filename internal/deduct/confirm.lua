-- Deletes the pending p:<id> fields of events now recorded in MySQL, if the
-- caller still holds the merchant lock.
--
-- KEYS[1] quota:{m}   KEYS[2] lock:quota:{m}
-- ARGV[1] lock token  ARGV[2..] event ids
--
-- Returns {'lock'} or {'ok', fields deleted}.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
local fields = {}
for i = 2, #ARGV do
  fields[#fields + 1] = 'p:' .. ARGV[i]
end
local deleted = 0
for j = 1, #fields, 1000 do
  deleted = deleted + redis.call('HDEL', KEYS[1], unpack(fields, j, math.min(j + 999, #fields)))
end
if deleted > 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'ver', 1)
end
return {'ok', deleted}
