// Package idgen issues Snowflake IDs (the quota_ledger primary keys) and
// leases the worker ID that makes them unique across processes.
//
// # Layout
//
// sign bit 0 | 41 bits ms since 2024-01-01T00:00:00Z | 10 bits worker | 12 bits sequence.
// A worker issues at most 4096 IDs per millisecond (4.096 M/s); IDs of one
// generator strictly increase. IDs are BIGINT in MySQL (ID implements
// driver.Valuer and sql.Scanner) and strings in JSON (JavaScript numbers lose
// precision above 2^53).
//
// # Clock
//
// The clock is read before the sequence is touched. A clock behind the newest
// issued millisecond by at most Options.MaxBackwardWait (5ms) is waited out;
// further back is an immediate *ClockBackwardError, so a caller can retry
// elsewhere rather than block for an unknown time. When a millisecond's 4096
// sequence numbers are used up, the call waits for the next millisecond,
// spinning with runtime.Gosched (a timer sleep may overshoot a millisecond and
// waste the next one's IDs). All waits of one call are bounded by
// Options.MaxWait. Past 2093 (41 bits) NextID fails with ErrTimeExhausted,
// never a wrapped or negative ID. There is no mutex: the state is one atomic
// word and a call reserves its IDs with one compare-and-swap, so no lock is
// ever held while waiting.
//
// # Worker lease
//
// Two processes with the same worker ID would issue the same IDs, so the ID
// is leased in Redis. keyspace.WorkerLease(id) holds, with SET NX PX, a JSON
// value naming the holder (pod, IP, start time) and a random token. A holder
// renews it every TTL/3 with a script that checks the whole value (and so
// the token) first. A start that finds the key held fails with a *HeldError
// naming the holder; it never takes a live lease over.
//
// The generator checks the lease on every call with one atomic load of a
// window (deadline, min and max timestamp), not a Redis round trip. The
// deadline is the send time of the last successful renewal plus TTL minus a
// margin (TTL/20), measured on the monotonic clock: Redis's own expiry comes
// later, so the lease stops issuance before another holder can get it. After
// a loss (key gone or not ours) Run re-acquires the ID when it is free.
//
// # High-water mark
//
// A lease alone does not stop a new holder whose clock is set back from
// reusing timestamps an earlier holder used. So every holder keeps in Redis a
// high-water mark: the newest Unix millisecond it may use. It lives in the
// hash keyspace.WorkerLease(id)+":hwm{"+keyspace.WorkerLease(id)+"}", fields
// ms and token (who wrote it), with no TTL, so it outlives the lease (1024
// tiny keys at most per prefix). Its hash tag is the whole lease key, so in a
// Redis Cluster both keys share a slot and one script updates both atomically.
//
//   - Acquire (with SET NX) reads the mark M and sets it to max(M, now)+TTL.
//     The new holder issues only timestamps after M: it waits for its clock
//     to pass M, at most LeaseOptions.MaxStartWait (3s), else fails with a
//     *StartWaitError naming M. (A mark this holder wrote itself, seen when
//     Run re-acquires after a loss, needs no wait: its own IDs increase.)
//   - Renew (token-checked) raises the mark to max(mark, now+TTL).
//   - The generator never issues a timestamp above the mark last written,
//     which covers every millisecond until the lease's local deadline; if the
//     clock jumps past it, NextID fails until the next renewal raises it.
//     So even a holder cut off from Redis cannot collide with the next one,
//     which starts after the mark.
//   - Release (token-checked) lowers the mark to the newest millisecond the
//     generator actually reserved (or to M if it reserved none), then deletes
//     the lease: a rolling restart need not wait out the TTL. After a crash
//     the lease expires TTL after the last renewal, when the clock is about
//     at the mark, so the next holder waits about nothing either.
//
// Only the current holder ever writes the mark (inside the token or NX
// check), which is why Release may lower it. The guarantee assumes Redis
// keeps acknowledged writes (a failover that loses them can lose a mark).
package idgen
