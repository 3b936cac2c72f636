// Package ledgerdb is the ledger's MySQL store: Commit writes a batch of
// debits and rejections in one transaction behind the overdraft guard
// (quota_ledger, merchant_balance, quota_grants, quota_outbox), Grant records
// credits, Expire records the expiries that are due, and the reads serve the
// write path and the operators. What the rows say is decided by package
// ledger; this package runs the SQL around it.
package ledgerdb
