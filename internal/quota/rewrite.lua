-- Replaces one shard's hash during a rebalance, if the caller still holds the
-- shard's lock: remain, ver, and the pending deductions the shard keeps
-- (carried over from any shard of the merchant, or made by the rebalance).
--
-- KEYS[1] quota:{m#s}  KEYS[2] lock:quota:{m#s}
-- ARGV[1] lock token   ARGV[2] remain  ARGV[3] ver
-- ARGV[4] the shard's overdraft floor ('0' reject, N, 'inf' overage)
-- ARGV[5] the layout's shard count (the deduction checks it)
-- ARGV[6..] pairs of pending field, value
--
-- Returns {'lock'} or {'ok', 1}.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {'lock'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'remain', ARGV[2], 'ver', ARGV[3], 'floor', ARGV[4], 'shards', ARGV[5])
-- unpack is bounded by the Lua C stack: 500 pairs at a time.
for j = 6, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, j, math.min(j + 999, #ARGV)))
end
return {'ok', 1}
