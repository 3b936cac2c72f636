package ledger

import (
	"context"
	"fmt"
	"time"
)

// admit waits until rows more rows may be written (MaxRowsInFlight) and
// returns the function that gives them back. Waiting ends with ctx.
func (s *Store) admit(ctx context.Context, rows int) (release func(), err error) {
	if s.inFlight == nil {
		return func() {}, nil
	}
	n := int64(min(rows, s.opts.MaxRowsInFlight))
	if s.inFlight.TryAcquire(n) {
		s.metrics.commitWaitSeconds.Observe(0)
		return func() { s.inFlight.Release(n) }, nil
	}
	start := time.Now()
	if err := s.inFlight.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("ledger: waiting to write %d rows: %w", rows, err)
	}
	s.metrics.commitWaitSeconds.Observe(time.Since(start).Seconds())
	return func() { s.inFlight.Release(n) }, nil
}
