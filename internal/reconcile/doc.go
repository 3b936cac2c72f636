// Package reconcile compares each merchant's Redis quota with the MySQL truth,
// reports every disagreement and repairs Redis, never MySQL.
//
// Per merchant, under its lock (one try; a busy merchant is tried once more
// at the end of the run), the quota hash and one MySQL snapshot describe one
// moment: expected = credited - debited - the pending amounts without a debit
// row, drift = remain - expected (classify). A repair, a compare-and-set
// script that aborts if the lock or ver moved, sets remain to credited -
// debited - the pending amounts younger than Grace (in-flight work, never
// touched) and deletes the older ones (orphans) and those already debited; a
// missing hash is hydrated (quota.Hydrate). negative_balance, ledger_mismatch,
// malformed and repairs beyond RepairCeiling are left for a person, as is
// every repair of a merchant with one of them.
//
// Separately, each merchant's ledger sums are audited against its balance
// row, incrementally from checkpoints that stop short of the ledger's MaxTxAge
// + slack + Settle, so a late commit never lands below one. A run appends one
// reconcile_runs row and a row per finding.
package reconcile
