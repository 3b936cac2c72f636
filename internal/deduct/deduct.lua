-- Deducts one merchant's events of a batch, atomically, if the caller still
-- holds the merchant lock (fencing: the lock value is the token).
--
-- KEYS[1] quota:{m} hash   KEYS[2] lock:quota:{m}
-- ARGV[1] lock token       ARGV[2] now, unix ms
-- ARGV[3] the shard count the events were routed by
-- ARGV[4..] pairs of event_id, amount (decimal)
--
-- Returns {'lock'} if the lock is not ours; {'missing'} if the hash has no
-- remain (a missing balance is unknown, never zero); {'layout'} if the hash
-- is a shard of another layout than the routing's (not these events' shard:
-- their pending deductions would be looked for elsewhere); else {'ok', remain, codes}
-- with one character per event, in order:
--   D deducted now (p:<id> = "<amount>:<now>" set): remain + floor >= amount
--   P deducted before a crash (p:<id> present with this amount): reused
--   I insufficient
--   C p:<id> present with another amount: conflicting event, nothing done
-- Every check happens before the first write: Redis does not roll back.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
local remain = redis.call('HGET', KEYS[1], 'remain')
if not remain then
  return {'missing'}
end
remain = tonumber(remain)
if not remain then
  return redis.error_reply('deduct: remain is not a number')
end
if (redis.call('HGET', KEYS[1], 'shards') or '1') ~= ARGV[3] then
  return {'layout'}
end
-- The overdraft policy's floor (set at hydration): remain may go down to
-- -floor; 'inf' (overage) never rejects; absent or malformed: 0 (reject).
local floor = redis.call('HGET', KEYS[1], 'floor')
if floor == 'inf' then
  floor = math.huge
else
  floor = tonumber(floor) or 0
end

-- Every p:<id> field of the batch, read before any write, in one HMGET per
-- 1000 events (unpack is bounded by the Lua C stack).
local names = {}
for i = 4, #ARGV, 2 do
  names[#names + 1] = 'p:' .. ARGV[i]
end
local found = {}
for j = 1, #names, 1000 do
  local part = redis.call('HMGET', KEYS[1], unpack(names, j, math.min(j + 999, #names)))
  for k = 1, #part do
    found[j + k - 1] = part[k]
  end
end

local codes = {}
local fields = {}
local seen = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local amount = tonumber(ARGV[i + 1])
  if not amount or amount <= 0 then
    return redis.error_reply('deduct: bad amount for event ' .. id)
  end
  local pending = found[(i - 2) / 2]
  if seen[id] then
    codes[#codes + 1] = 'C'
  elseif pending then
    if string.match(pending, '^(%d+)') == ARGV[i + 1] then
      codes[#codes + 1] = 'P'
    else
      codes[#codes + 1] = 'C'
    end
  elseif remain + floor >= amount then
    remain = remain - amount
    fields[#fields + 1] = 'p:' .. id
    fields[#fields + 1] = ARGV[i + 1] .. ':' .. ARGV[2]
    codes[#codes + 1] = 'D'
  else
    codes[#codes + 1] = 'I'
  end
  seen[id] = true
end

local left = string.format('%d', remain)
if #fields > 0 then
  redis.call('HSET', KEYS[1], 'remain', left)
  -- unpack is bounded by the Lua C stack: write the fields in chunks.
  for j = 1, #fields, 1000 do
    redis.call('HSET', KEYS[1], unpack(fields, j, math.min(j + 999, #fields)))
  end
  redis.call('HINCRBY', KEYS[1], 'ver', 1)
end
return {'ok', left, table.concat(codes)}
