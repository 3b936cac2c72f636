package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"
)

// inTx runs fn in a transaction bounded by MaxTxAge, and runs it again from the start when MySQL
// reports a deadlock or a lock wait timeout (InnoDB rolls a deadlock victim
// back whole; a timed-out statement is rolled back here). After opts.Attempts
// tries the last error is returned: transient, the caller retries later.
func (s *Store) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	pause := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		start := time.Now()
		tctx, cancel := context.WithTimeout(ctx, MaxTxAge)
		err := s.db.WithContext(tctx).Transaction(fn)
		cancel()
		s.metrics.txSeconds.Observe(time.Since(start).Seconds())
		if err == nil || !retryable(err) {
			return err
		}
		if attempt >= s.opts.Attempts {
			return fmt.Errorf("ledger: gave up after %d attempts: %w", attempt, err)
		}
		s.metrics.deadlockRetries.Inc()
		// Full jitter: concurrent victims of one deadlock must not collide again.
		wait := pause/2 + rand.N(pause/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ledger: %w (after %v)", ctx.Err(), err)
		case <-t.C:
		}
		pause *= 2
	}
}
