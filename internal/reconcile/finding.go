package reconcile

// Kind classifies a finding.
type Kind string

// Kinds of findings. The Redis kinds compare the quota hash with
// merchant_balance; the critical kinds are about MySQL and are never repaired.
const (
	KindRedisHigh       Kind = "redis_high"       // remain above expected: overdraft risk
	KindRedisLow        Kind = "redis_low"        // remain below expected: under-reporting
	KindMissingKey      Kind = "missing_key"      // no quota hash: routine (a grant, an eviction), not drift
	KindOrphanPending   Kind = "orphan_pending"   // pending deductions older than Grace with no ledger row
	KindStalePending    Kind = "stale_pending"    // pending fields whose debit rows exist: a confirm that never ran
	KindNegativeBalance Kind = "negative_balance" // below what the overdraft policy allows (critical)
	KindLedgerMismatch  Kind = "ledger_mismatch"  // ledger rows do not sum to the balance row (critical)
	KindMalformed       Kind = "malformed"        // a quota hash that cannot be parsed (critical)
	KindGrantsMismatch  Kind = "grants_mismatch"  // active grants' remaining != max(available, 0) (critical)
)

// critical reports whether a finding of this kind is left for a person and
// blocks every Redis repair of its merchant.
func (k Kind) critical() bool {
	return k == KindNegativeBalance || k == KindLedgerMismatch || k == KindMalformed || k == KindGrantsMismatch
}

// drift reports whether a finding of this kind is drift. A missing quota hash
// is not: a grant or an eviction leaves one, and the next event hydrates it
// as the reconciler would. It is still reported, and hydrated.
func (k Kind) drift() bool { return k != KindMissingKey }

// redisDrift reports whether the kind counts toward a run's absolute drift.
func (k Kind) redisDrift() bool {
	return k == KindRedisHigh || k == KindRedisLow || k == KindOrphanPending
}

// Action is what the run did about a finding.
type Action string

// Actions.
const (
	ActionRepaired    Action = "repaired"     // Redis was corrected
	ActionReported    Action = "reported"     // left for a person (critical, or held by one)
	ActionOverCeiling Action = "over_ceiling" // the repair exceeds RepairCeiling
	ActionDryRun      Action = "dry_run"      // would have been repaired
	ActionAborted     Action = "aborted"      // ver or the lock moved under the repair
)

// Finding is one disagreement found on one merchant. RedisValue is nil when
// there is no quota hash. For the Redis kinds Delta = RedisValue - Expected
// (orphan_pending: Expected is remain with the orphans given back); for
// ledger_mismatch Expected is the ledger's sum and Delta the balance row minus
// it; for negative_balance Expected = Delta = credited - debited.
type Finding struct {
	MerchantID string `json:"merchant_id"`
	Kind       Kind   `json:"kind"`
	RedisValue *int64 `json:"redis_value"`
	Expected   int64  `json:"expected"`
	Delta      int64  `json:"delta"`
	Pending    int64  `json:"pending"`
	Action     Action `json:"action"`
	Detail     string `json:"detail,omitempty"`
}
