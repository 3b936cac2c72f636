// Package deduct is the write path of a payment: per merchant and per batch,
// under the merchant lock, an atomic Lua deduction in Redis, one MySQL
// transaction that records every event (package ledger), and a Lua settle.
//
// # Redis state
//
// The quota hash is package quota's (remain, ver, p:<event_id>). A missing
// hash is not zero and not infinite: the deduction script reports it without
// writing, the Deductor reads merchant_balance (credited - debited) and
// hydrates the hash (quota.Hydrate), then deducts again. Every script first
// compares the merchant lock's value with the caller's token (fencing) and
// fails with ErrLockLost if it differs.
//
// # The protocol (Apply)
//
//  1. Lock the batch's merchants, all at once and in sorted order (one
//     Locker.Acquire: one round trip when none is held elsewhere, no deadlock
//     between workers); released all at once in step 6.
//  2. One indexed query for the event_ids already in the ledger: same merchant
//     and amount is a duplicate, anything else a permanent conflict.
//  3. One pipelined round trip of Lua deductions, one call per merchant. Per
//     event: p:<id> present (deducted before a crash) is reused; remain >=
//     amount deducts and sets p:<id>; else insufficient.
//  4. One MySQL transaction inserts a row per event (debit or rejected) and
//     moves each merchant's balance once, behind the overdraft guard (one
//     guarded UPDATE for all the batch's merchants). MySQL decides every
//     outcome: a guard that fails (Redis allowed what MySQL refuses) or a
//     rejection MySQL could cover (Redis refused what MySQL allows) means the
//     cache is stale: the hash is dropped, hydrated from MySQL, and the batch
//     redone (bounded). A guard that fails because a grant's expiry is due
//     drops the hashes, records the expiry (ledger.Expire) and redoes too.
//  5. One pipelined round trip of Lua settles deletes the p: fields of the
//     batch's debits. An event that ended without a debit of this batch
//     (duplicate, conflict) must leave no deduction behind: if its p: field
//     is there, the hash is dropped and rebuilt from MySQL, since the cache
//     cannot tell whose deduction it was.
//  6. Unlock.
//
// # Sharded merchants (package shard)
//
// A merchant with S > 1 shards has a hash and a lock per shard; events are
// routed to the shard of their event_id and batches lock only their shards.
// Each shard's hash records its layout's count: a deduction routed by a
// count that is behind (a cache not refreshed since a resharding) is refused
// there and goes to the wide pass, so an event's pending deduction is always
// in its shard of the layout, where a redelivery finds it.
// A shard that cannot cover an event rejects it only if MySQL agrees in step
// 4; if MySQL covers it, the merchant's shards of the batch are dropped and,
// like a missing shard or a layout MySQL no longer has, its events go to the
// wide pass (applyWide): under every shard lock of the merchant it recomputes
// the quota from MySQL minus the deductions in flight, decides the events as
// the ledger's guard will (decide), and rewrites every shard; steps 4-6 then
// run as above. A resharding folds the old layout the same way (Reshard).
//
// A process killed between any two steps, followed by a redelivery of the same
// events, ends in the state of a run without the kill: the ledger's unique
// event_id stops a second row, p:<id> stops a second Redis deduction, and the
// settle of duplicates drops what the kill left.
//
// An error returned by Apply is transient and concerns the whole batch: none
// of it may be assumed done, and applying the same batch again is safe.
// Per-event permanent errors (conflict, refused, invalid) are in the Results.
package deduct
