// Package ledger is the MySQL side of the write path: the append-only
// quota_ledger (UNIQUE event_id: an event counts at most once), the
// merchant_balance totals, and the one transaction per batch that writes both
// behind the overdraft guard (see Commit), which also attributes the debits
// to the merchant's grants (quota_grants, burn-down order: Attribute) and
// refuses them once a grant's expiry is due (Expire records it). Its errors:
// *GuardError (stale cache, redo), *ExpiryDueError (drop the caches, Expire,
// redo), ErrDuplicate (redo from ExistingEvents), *RefusedError (a value
// refused), anything else transient.
package ledger
