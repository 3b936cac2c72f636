// Package idgen issues Snowflake IDs (the quota_ledger primary keys) and
// leases the worker ID that makes them unique across processes.
//
// Layout: sign bit 0 | 41 bits ms since 2024-01-01T00:00:00Z | 10 bits worker
// | 12 bits sequence: at most 4096 IDs per millisecond per worker, strictly
// increasing per generator, never wrapped or negative (ErrTimeExhausted in 2093).
//
// Clock: a clock behind the newest issued millisecond by at most 5ms is waited
// out; further back is an immediate *ClockBackwardError, so a caller can retry
// elsewhere rather than block. All waits of one call are bounded by 1s.
//
// Lease: keyspace.WorkerLease(id) holds, with SET NX PX, the holder (pod, IP,
// start) and a random token; it is renewed every TTL/3 by a script that checks
// the token, and never taken over from a live holder (*HeldError). The
// generator checks a local window on every call: valid until the send time of
// the last renewal plus TTL minus TTL/20 on the monotonic clock, so issuance
// stops before Redis expires the key and another holder could take it.
//
// High-water mark: a lease alone does not stop a new holder whose clock is set
// back from reusing an earlier holder's timestamps. So the hash
// WorkerLease(id)+":hwm{"+WorkerLease(id)+"}" (same Cluster slot, no TTL)
// keeps the newest Unix ms a holder may use. Acquire raises it to
// max(M, now)+TTL and the new holder issues only after M (waiting up to 3s,
// else *StartWaitError; a mark it wrote itself needs no wait); renew raises it
// to now+TTL; the generator never issues above it, even cut off from Redis.
// Release (token-checked) lowers it to the newest millisecond actually used,
// so a rolling restart need not wait out the TTL. Only the holder writes the
// mark; the guarantee assumes Redis keeps acknowledged writes.
package idgen
