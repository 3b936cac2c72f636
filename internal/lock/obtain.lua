-- Takes the keys in order with one token: SET NX PX, or PEXPIRE where the key
-- already holds the token (a retried call, or a waiter's earlier try). Stops at
-- the first key someone else holds, so a waiter holds no key beyond it.
-- KEYS lock keys; ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns 1 per key taken, in order, then 0 for the key held by someone else.
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = 1
  elseif redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    out[i] = 1
  else
    out[i] = 0
    break
  end
end
return out
