package deduct

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
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
		workers = 64
		events  = 10_000
		quota   = 1_000
	)
	others := []string{"m-1", "m-2", "m-3"}
	e.grant("hot", quota)
	for _, m := range others {
		e.grant(m, 1_000_000)
	}

	var applied, rejected, otherSent, retries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []int
			for i := w; i < events; i += workers {
				mine = append(mine, i)
			}
			for len(mine) > 0 {
				n := min(1+rng.IntN(40), len(mine))
				var batch []event.PaymentSucceeded
				for _, i := range mine[:n] {
					batch = append(batch, pay(fmt.Sprintf("hot-%d", i), "hot", 1))
					if rng.IntN(8) == 0 {
						m := others[rng.IntN(len(others))]
						batch = append(batch, pay(fmt.Sprintf("%s-%d", m, i), m, 1))
						otherSent.Add(1)
					}
				}
				mine = mine[n:]
				res, err := applyRetrying(e.d, batch, &retries)
				if err != nil {
					errs <- err
					return
				}
				for k, r := range res {
					switch {
					case batch[k].MerchantID != "hot" && (r.Outcome == Applied || r.Outcome == Duplicate):
					case r.Outcome == Applied:
						applied.Add(1)
					case r.Outcome == Insufficient:
						rejected.Add(1)
					case r.Outcome == Duplicate && retries.Load() > 0:
						// a retry of a batch whose first try was recorded
					default:
						errs <- fmt.Errorf("event %s: unexpected %+v", batch[k].EventID, r)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("batches retried after a transient error: %d", retries.Load())
	if retries.Load() == 0 && (applied.Load() != quota || rejected.Load() != events-quota) {
		t.Errorf("outcomes: %d applied, %d insufficient; want %d and %d", applied.Load(), rejected.Load(), quota, events-quota)
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
	if want := int64(events) + otherSent.Load(); rows != want {
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
