-- Settles one merchant's events of a batch once MySQL has them, if the caller
-- still holds the merchant lock.
--
-- KEYS[1] quota:{m}   KEYS[2] lock:quota:{m}
-- ARGV[1] lock token  ARGV[2] n
-- ARGV[3..2+n]  events this batch recorded as debits: their p: fields are
--               now in MySQL and are deleted
-- ARGV[3+n..]   events that ended without a debit of this batch (recorded
--               before, by another holder, or as a rejection; conflicting;
--               refused): a p: field of one of them is a deduction that no
--               debit of this batch matches, and the cache cannot tell whose
--               it was, so the hash is dropped and rebuilt from MySQL on its
--               next use.
--
-- Returns {'lock'} or {'ok', fields deleted, 1 if the hash was dropped else 0}.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
local n = tonumber(ARGV[2])
for i = 3 + n, #ARGV do
  if redis.call('HEXISTS', KEYS[1], 'p:' .. ARGV[i]) == 1 then
    redis.call('DEL', KEYS[1])
    return {'ok', 0, 1}
  end
end
local fields = {}
for i = 3, 2 + n do
  fields[#fields + 1] = 'p:' .. ARGV[i]
end
local deleted = 0
for j = 1, #fields, 1000 do
  deleted = deleted + redis.call('HDEL', KEYS[1], unpack(fields, j, math.min(j + 999, #fields)))
end
if deleted > 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'ver', 1)
end
return {'ok', deleted, 0}
