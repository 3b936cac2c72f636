package reconcile

import (
	"context"
	"time"
)

// Loop runs Run every period, the first at once, until ctx ends; each report
// goes to done (a run cut short by the end of ctx too). It returns nil when
// ctx ends: a failed run is logged and reported, and the next one tries again.
func (r *Reconciler) Loop(ctx context.Context, every time.Duration, done func(*Report)) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		started := time.Now()
		if rep := r.Run(ctx); done != nil {
			done(rep)
		}
		if ctx.Err() != nil {
			// Both cases of the select would be ready; never start a run that
			// is cancelled before it begins.
			return nil
		}
		timer.Reset(max(every-time.Since(started), 0))
	}
}
