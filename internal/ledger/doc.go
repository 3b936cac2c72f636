// Package ledger is billing's money with no database: the append-only
// ledger's rows and the balances they move (Row, Balance), and the decisions
// each transaction of package ledgerdb applies: the overdraft policy
// (Policy), the burn-down of grants (Attribute, Book, PayDebits), expiry and
// rollover (Book.Expire), seq and balance_after (Sequence), the balance
// events a row announces (RowEvents), and Replay, the reference model every
// recorded ledger must agree with. Its errors are the store's outcomes:
// *GuardError (stale cache, redo), *ExpiryDueError (drop the caches, Expire,
// redo), ErrDuplicate (redo from ExistingEvents), *RefusedError (a value
// refused); anything else is transient.
package ledger
