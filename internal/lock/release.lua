-- Deletes each key that still holds our token; touches no other.
-- KEYS lock keys; ARGV[1] token.
-- Returns, per key, 1 when deleted, 0 when it is not ours.
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('GET', key) == ARGV[1] then
    out[i] = redis.call('DEL', key)
  end
end
return out
