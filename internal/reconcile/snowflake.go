package reconcile

import "time"

// The Snowflake layout of ledger ids (DESIGN.md, "Snowflake"): 41 bits of
// milliseconds since 2024-01-01 UTC, then 10 bits of worker and 12 of sequence.
const (
	snowflakeEpochMilli = 1704067200000 // 2024-01-01T00:00:00Z
	snowflakeTimeShift  = 10 + 12
)

// settledBound is the largest ledger id whose time is at least margin before
// now: rows with an id at or below it are taken as settled (every transaction
// that could still insert such an id has ended), so their sums may be
// checkpointed. Ids are not inserted in id order, so a smaller margin risks a
// checkpoint that misses a late row (which then shows as a ledger_mismatch
// until a LedgerFull run).
func settledBound(now time.Time, margin time.Duration) int64 {
	ms := now.Add(-margin).UnixMilli() - snowflakeEpochMilli
	if ms < 0 {
		return 0
	}
	return ms<<snowflakeTimeShift | (1<<snowflakeTimeShift - 1)
}
