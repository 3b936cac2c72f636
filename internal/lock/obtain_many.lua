-- obtain.lua for many keys at once, on a single Redis (the keys may lie in
-- different slots, so never on a Cluster).
-- KEYS[i] lock key; ARGV[1] TTL in milliseconds; ARGV[1 + i] token of KEYS[i].
-- Returns one reply of obtain.lua per key, in order.
local out = {}
for i, key in ipairs(KEYS) do
  local token = ARGV[1 + i]
  if redis.call('SET', key, token, 'NX', 'PX', ARGV[1]) then
    out[i] = 1
  elseif redis.call('GET', key) == token then
    redis.call('PEXPIRE', key, ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
