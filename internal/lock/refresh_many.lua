-- refresh.lua for many keys at once, on a single Redis (the keys may lie in
-- different slots, so never on a Cluster).
-- KEYS[i] lock key; ARGV[2i - 1] its token; ARGV[2i] its new TTL in milliseconds.
-- Returns one reply of refresh.lua per key, in order.
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2 * i])
  else
    out[i] = 0
  end
end
return out
