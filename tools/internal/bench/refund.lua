-- Gives back a deduction whose ledger transaction failed.
-- KEYS[1] = quota:{m}; ARGV[1] = amount. Returns the new remain.
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return redis.call('HINCRBY', KEYS[1], 'remain', ARGV[1])
