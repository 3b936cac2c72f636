// Package ledger is the MySQL side of the write path: the append-only
// quota_ledger, the merchant_balance running totals, and the one transaction
// per batch that writes both.
//
// The ledger is the source of truth. Its UNIQUE event_id makes an event count
// at most once whatever Redis says, and the guarded balance update
//
//	UPDATE merchant_balance SET debited = debited + X
//	WHERE merchant_id = ? AND credited - debited >= X
//
// makes an overdraft impossible even when the Redis cache over-reports: a
// guard that matches no row fails the transaction with a *GuardError and the
// caller refreshes its cache and redoes the batch. One statement applies it to
// every merchant of a batch (see guardedDebit), so a batch costs the same few
// statements whatever the number of its merchants.
//
// A merchant's credit rows always sum to its credited total and its debit rows
// to its debited total, because one transaction writes the rows and moves the
// totals. Rejected rows keep the requested amount and move nothing.
//
// Errors: *GuardError (stale cache, redo), ErrDuplicate (an event_id of the
// batch was inserted concurrently, redo from the existing-events query),
// *RefusedError (the database refused a value; EventID names the event when it
// can be identified), and anything else is transient. Deadlocks and lock wait
// timeouts are retried inside Commit and Grant a few times first.
package ledger
