-- release.lua for many keys at once, on a single Redis (the keys may lie in
-- different slots, so never on a Cluster).
-- KEYS[i] lock key; ARGV[2i - 1] its token; ARGV[2i] its release channel.
-- Returns one reply of release.lua per key, in order.
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    redis.call('DEL', key)
    redis.call('PUBLISH', ARGV[2 * i], '1')
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
