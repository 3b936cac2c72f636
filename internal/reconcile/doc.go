// Package reconcile compares each merchant's Redis quota with the MySQL truth,
// reports every disagreement and repairs Redis (never MySQL).
//
// # The view of one merchant
//
// The reconciler takes the merchant lock once (a single try with a short TTL;
// a merchant held by a worker is skipped as "busy" and retried once at the end
// of the run), reads the quota hash, and then reads merchant_balance and the
// ledger rows of the pending events in one MySQL snapshot. Under the lock no
// worker mutates the hash (every worker script is fenced by the lock token), so
// the two reads describe one moment:
//
//	T        = credited - debited
//	young    = pending entries without a debit row, younger than Grace (in-flight work)
//	orphans  = pending entries without a debit row, older than Grace
//	expected = T - sum(young) - sum(orphans)
//	drift    = remain - expected
//
// A pending entry whose event already has a debit row of the merchant is a
// confirmation that never ran (stale_pending): its field is removed and remain is
// left alone. The repair sets remain = T - sum(young): drift is corrected and
// orphan deductions are given back; young entries are never touched.
//
// # Repairs
//
// One compare-and-set Lua call per merchant (repair.lua) checks that the lock
// still holds our token and that ver has not moved since the read, then sets
// remain, bumps ver and deletes the repaired p: fields. Anything else is an
// abort, recorded as such; the next run looks again. A missing quota hash is not
// zero: it is reported as missing_key and, with HydrateMissing (the default),
// hydrated from merchant_balance by quota.Hydrate, which writes only if the hash
// is still absent and the lock is still ours — exactly what a worker would do
// on its next event, done early so the next run finds nothing.
//
// Never repaired, always left for a person: negative_balance (credited <
// debited), ledger_mismatch (the ledger's credit or debit rows do not sum to the
// balance row), malformed (a quota hash the reconciler cannot parse), and any
// Redis repair larger than RepairCeiling (over_ceiling). A merchant with a
// critical finding gets no Redis repair either: which side is wrong is a
// person's call.
//
// # The ledger audit
//
// Separately from the Redis check, each merchant's credit and debit rows are
// summed and compared with its balance row, in one snapshot (so a commit between
// the two reads cannot fake a mismatch). Sums are kept in reconcile_checkpoints
// up to a ledger id, and each run adds only newer rows. Ids do not reach the
// table in id order: a writer takes them inside a transaction attempt that may
// last up to the ledger's MaxTxAge. So only rows whose id time is older than
// MaxTxAge + slack (clock skew) + Settle are folded into a checkpoint, which a
// late commit therefore never passes; newer rows are summed afresh every run.
// A stored checkpoint beyond that bound (an older version's, a shorter
// Settle's) is not built on: the merchant is summed from its first row and the
// checkpoint rewritten. LedgerFull ignores the checkpoints and rewrites them
// from a full sum.
//
// # Audit trail
//
// Every run appends one reconcile_runs row and one reconcile_findings row per
// finding, in one transaction at the end of the run (the schema has no state for
// an unfinished run, and audit rows are never updated). Each repair is also
// logged when it happens, so a run killed before its audit is written still
// leaves a trace in the logs.
package reconcile
