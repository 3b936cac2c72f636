package deduct

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
)

// TestNoOverdraftUnderConcurrency: 64 goroutines send 10,000 events of 1 for a
// merchant with 1,000, in batches of varying size that also carry events of
// other merchants (shared between goroutines). Exactly 1,000 are applied.
func TestNoOverdraftUnderConcurrency(t *testing.T) {
	e := newEnv(t)
	const (
		events = 10_000
		quota  = 1_000
	)
	others := []string{"m-1", "m-2", "m-3"}
	e.grant("hot", quota)
	for _, m := range others {
		e.grant(m, 1_000_000)
	}

	run := runHot(t, e, events, others, nil)
	t.Logf("batches retried after a transient error: %d", run.retries)
	if run.retries == 0 && (run.applied != quota || run.rejected != events-quota) {
		t.Errorf("outcomes: %d applied, %d insufficient; want %d and %d", run.applied, run.rejected, quota, events-quota)
	}
	sums, err := e.sums(context.Background(), []string{"hot"})
	if err != nil {
		t.Fatal(err)
	}
	if s := sums["hot"]; s.Debited != quota || s.Rejected != events-quota {
		t.Errorf("ledger: debited %d, %d rejected rows; want %d and %d", s.Debited, s.Rejected, quota, events-quota)
	}
	if remain, _ := e.quota("hot"); remain != 0 {
		t.Errorf("remain = %d, want 0", remain)
	}
	if b := e.balance("hot"); b.Debited != quota {
		t.Errorf("balance debited = %d, want %d", b.Debited, quota)
	}
	var rows int64
	if err := e.mysql.DB.Model(&ledger.Row{}).Where("kind <> 'credit'").Count(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if want := int64(events) + run.otherSent; rows != want {
		t.Errorf("%d ledger rows, want one per event (%d)", rows, want)
	}
	e.checkConsistent()
}

// applyRetrying retries a batch after a transient error, as the consumer does.
func applyRetrying(d *Deductor, batch []event.PaymentSucceeded, retries *atomic.Int64) ([]Result, error) {
	var last error
	for range 5 {
		res, err := d.Apply(context.Background(), batch)
		if err == nil {
			return res, nil
		}
		retries.Add(1)
		last = err
	}
	return nil, fmt.Errorf("batch failed 5 times: %w", last)
}
