-- Per-event deduction of the redis-per-event strategy (the seed's "after").
-- KEYS[1] = quota:{m}; ARGV[1] = amount, a positive integer.
-- Returns {1, remain_after} when deducted, {0, remain} when the balance is
-- short, {-1, 0} when the balance is missing: a missing balance is unknown,
-- not zero (the seed's script confused the two), so the caller fails loudly.
local remain = redis.call('HGET', KEYS[1], 'remain')
if not remain then
  return {-1, 0}
end
remain = tonumber(remain)
local need = tonumber(ARGV[1])
if remain < need then
  return {0, remain}
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {1, redis.call('HINCRBY', KEYS[1], 'remain', -need)}
