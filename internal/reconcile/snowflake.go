package reconcile

import (
	"time"

	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
)

// A ledger row's id is a Snowflake id its writer takes inside the transaction
// attempt that inserts it, so a row can reach the table after rows with larger
// ids, but only so late:
const (
	// maxTxAge is how long a ledger transaction attempt may stay open after
	// taking its ids: the ledger writer's promise.
	maxTxAge = ledger.MaxTxAge
	// slack covers clock skew between the writers' hosts and the reconciler's,
	// and a COMMIT the server finishes after the writer's deadline.
	slack = 5 * time.Second
)

// timeShift is where the milliseconds start in an id.
const timeShift = idgen.WorkerBits + idgen.SequenceBits

// settledBound is the largest ledger id whose time is at least late+settle
// before now. When late covers maxTxAge and slack, no transaction still to
// commit can insert an id at or below it, so rows up to it may be checkpointed:
// a checkpoint there is never passed by a late commit. settle is the
// operator's extra margin.
func settledBound(now time.Time, late, settle time.Duration) int64 {
	ms := now.Add(-late-settle).UnixMilli() - idgen.EpochUnixMilli
	if ms < 0 {
		return 0
	}
	return ms<<timeShift | (1<<timeShift - 1)
}
