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

// hotRun is what runHot did.
type hotRun struct {
	applied, rejected int64 // of the hot merchant's events
	otherSent         int64 // events of the other merchants mixed in
	retries           int64 // batches tried again after a transient error
}

// runHot sends events of 1 for merchant "hot" from 64 goroutines in batches of
// varying size, now and then with an event of one of others (shared between
// goroutines), while raise (if not nil) lies to Redis now and then.
func runHot(t *testing.T, e *env, events int, others []string, raise func()) hotRun {
	t.Helper()
	const workers = 64
	var nApplied, nRejected, otherSent, retries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := w; i < events; {
				var batch []event.PaymentSucceeded
				for n := 1 + rng.IntN(40); n > 0 && i < events; n, i = n-1, i+workers {
					batch = append(batch, pay(fmt.Sprintf("hot-%d", i), "hot", 1))
					if len(others) > 0 && rng.IntN(8) == 0 {
						m := others[rng.IntN(len(others))]
						batch = append(batch, pay(fmt.Sprintf("%s-%d", m, i), m, 1))
						otherSent.Add(1)
					}
				}
				if raise != nil && rng.IntN(4) == 0 {
					raise()
				}
				res, err := applyRetrying(e.d, batch, &retries)
				if err != nil {
					errs <- err
					return
				}
				for k, r := range res {
					switch {
					case batch[k].MerchantID != "hot" && (r.Outcome == Applied || r.Outcome == Duplicate):
					case r.Outcome == Applied:
						nApplied.Add(1)
					case r.Outcome == Insufficient:
						nRejected.Add(1)
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
	return hotRun{applied: nApplied.Load(), rejected: nRejected.Load(), otherSent: otherSent.Load(), retries: retries.Load()}
}

// lowestBalanceAfter is the lowest balance_after of merchant's debit rows.
func (e *env) lowestBalanceAfter(merchant string) int64 {
	e.t.Helper()
	var low int64
	if err := e.mysql.DB.Raw("SELECT COALESCE(MIN(balance_after), 0) FROM quota_ledger WHERE merchant_id = ? AND kind = 'debit'", merchant).Scan(&low).Error; err != nil {
		e.t.Fatal(err)
	}
	return low
}

// TestFloorHoldsUnderConcurrency: a merchant with 1,000 and floor 500 takes
// exactly 1,500 of 4,000 events of 1 from 64 goroutines, while its Redis
// remain is raised by hand again and again: MySQL's guard never lets the
// balance below -500, and Redis comes back to the truth.
func TestFloorHoldsUnderConcurrency(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.grant("hot", 1000)
	if err := e.d.SetPolicy(ctx, "hot", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 500}); err != nil {
		t.Fatal(err)
	}
	var raised atomic.Int64
	raise := func() {
		// A lie Redis may tell after a failover: far more than MySQL has.
		if e.redis.Client.HSet(ctx, e.redis.Keys.Quota("hot"), "remain", 1_000_000).Err() == nil {
			raised.Add(1)
		}
	}
	run := runHot(t, e, 4000, nil, raise)
	t.Logf("redis raised by hand %d times", raised.Load())
	if run.applied != 1500 || run.rejected != 2500 {
		t.Errorf("%d applied, %d rejected; want 1500 and 2500", run.applied, run.rejected)
	}
	b := e.balance("hot")
	if b.Available() != -500 {
		t.Errorf("balance %d, want -500", b.Available())
	}
	if low := e.lowestBalanceAfter("hot"); low < -500 {
		t.Errorf("a debit left the balance at %d, below the floor", low)
	}
	// One more event exposes a last lie; then Redis holds the truth.
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("hot-last", "hot", 1)}); res[0].Outcome != Insufficient {
		t.Fatalf("past the floor: %+v", res[0])
	}
	e.checkConsistent()
}

// TestOverageNeverRejects: under overage every event is applied, the
// balance goes as far below zero as the traffic takes it, and the debits'
// overage sums to exactly the part below zero; a grant then takes the billed
// overage off the balance (a billed row) and credits in full, and a debit
// from a positive balance again records overage only past zero.
func TestOverageNeverRejects(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.grant("hot", 300)
	if err := e.d.SetPolicy(ctx, "hot", ledger.Policy{Kind: ledger.PolicyOverage}); err != nil {
		t.Fatal(err)
	}
	if run := runHot(t, e, 1000, nil, nil); run.applied != 1000 || run.rejected != 0 {
		t.Fatalf("%d applied, %d rejected; want all 1000 applied", run.applied, run.rejected)
	}
	overage := func() int64 {
		var sum int64
		if err := e.mysql.DB.Raw("SELECT COALESCE(SUM(overage), 0) FROM quota_ledger WHERE merchant_id = 'hot'").Scan(&sum).Error; err != nil {
			t.Fatal(err)
		}
		return sum
	}
	if b := e.balance("hot"); b.Available() != -700 || overage() != 700 {
		t.Fatalf("balance %d, overage %d; want -700 and 700", b.Available(), overage())
	}
	e.grant("hot", 10) // the 700 over are billed: back to 0, then 10
	res := e.apply(e.d, []event.PaymentSucceeded{pay("big", "hot", 25)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != -15 {
		t.Fatalf("debit of 25 from 10: %+v", res[0])
	}
	if got := overage(); got != 715 {
		t.Errorf("overage %d, want 715 (15 more: the part of the debit below zero)", got)
	}
	e.checkConsistent()
}
