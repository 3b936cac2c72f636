package load

import (
	"context"

	"github.com/quotaflow/billing/internal/workload"
	"github.com/quotaflow/billing/tools/internal/bench"
)

// baseline runs internal/bench's rowlock strategy (a transaction per event
// with SELECT ... FOR UPDATE on the merchant's row, bench's 16 callers) over
// the same merchants and skew, on a database of its own. A failure is
// reported in the Baseline, not as the run's error: the workers' figures stand.
func baseline(ctx context.Context, o Options, st *stage) *Baseline {
	cfg := bench.DefaultConfig()
	cfg.AdminDSN = st.AdminDSN
	cfg.Strategies = []string{bench.NameRowLock}
	cfg.Events, cfg.Merchants, cfg.Seed = o.BaselineEvents, o.Merchants, o.Seed
	cfg.Skew = workload.HotSkew(o.Hot)
	cfg.KeyPrefix = st.Prefix + "bench:"
	b := &Baseline{Events: o.BaselineEvents}
	rep, err := bench.Run(ctx, cfg, st.Redis, o.Log)
	switch {
	case err != nil:
		b.Error = err.Error()
	case len(rep.Results) != 1:
		b.Error = "bench reported no result"
	case !rep.Results[0].OK():
		b.Error = "rowlock did not pass its checks: " + rep.Results[0].Error
	default:
		b.EventsPerSec = rep.Results[0].EventsPerSec
	}
	return b
}
