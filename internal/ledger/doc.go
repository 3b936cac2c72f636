// Package ledger is the MySQL side of the write path: the append-only
// quota_ledger (UNIQUE event_id: an event counts at most once), the
// merchant_balance totals, and the one transaction per batch that writes both
// behind the overdraft guard (see Commit). Its errors: *GuardError (stale
// cache, redo), ErrDuplicate (redo from ExistingEvents), *RefusedError (a
// value refused), anything else transient.
package ledger
