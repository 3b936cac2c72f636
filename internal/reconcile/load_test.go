package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/idgen"
)

// A reconciler looping while workers deduct, grant and redeliver finds no
// drift and repairs nothing it should not; afterwards the state is exact.
// The only finding allowed is missing_key: a grant drops the merchant's hash by
// design, and hydrating it early is what the next deduction would do.
func TestNoFalseFindingsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrent load: not in -short")
	}
	e := newEnv(t)
	d := e.deductor(deduct.Options{})
	const merchants, workers, batches = 10, 4, 150
	ctx := context.Background()
	for i := range merchants {
		amount := int64(1_000_000)
		if i == 0 {
			amount = 300 // runs dry: rejections too
		}
		if _, err := d.Grant(ctx, loadMerchant(i), amount, "grant-0-"+loadMerchant(i)); err != nil {
			t.Fatal(err)
		}
	}

	// Checkpoints advance during the load: they follow seq, which commits in order.
	r, _ := e.reconciler(Config{PageSize: 3, Concurrency: 2, BusyRetryDelay: 5 * time.Millisecond})
	loopCtx, stopLoop := context.WithCancel(ctx)
	var reports []*Report
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		_ = r.Loop(loopCtx, 5*time.Millisecond, func(rep *Report) { reports = append(reports, rep) })
	}()

	var applied, grants atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error { return loadWorker(gctx, d, w, batches, &applied, &grants) })
	}
	loadErr := g.Wait()
	stopLoop()
	loop.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}

	var checked, busy int64
	for i, rep := range reports {
		if rep.Err() != nil && i < len(reports)-1 { // the last run may be cut short by the stop
			t.Errorf("run %d failed: %v", i, rep.Err())
		}
		checked += rep.Checked
		busy += rep.Busy
		for _, f := range rep.Findings {
			if f.Kind != KindMissingKey || f.Action != ActionRepaired {
				t.Errorf("run %d: false finding %+v", i, f)
			}
		}
	}
	t.Logf("%d events applied, %d grants, by %d workers; %d reconcile runs checked %d merchants, %d busy skips",
		applied.Load(), grants.Load(), workers, len(reports), checked, busy)
	if len(reports) < 3 || checked == 0 {
		t.Fatalf("the reconciler hardly ran: %d runs, %d merchants checked", len(reports), checked)
	}
	assertExact(t, e, merchants)
}

// loadWorker applies batches of random events, redelivers some, and grants now and then.
func loadWorker(ctx context.Context, d *deduct.Deductor, w, batches int, applied, grants *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	var last []event.PaymentSucceeded
	for b := range batches {
		if b%40 == 39 {
			m := loadMerchant(rng.IntN(10))
			if _, err := d.Grant(ctx, m, 50, fmt.Sprintf("grant-%d-%d", w, b)); err != nil {
				return err
			}
			grants.Add(1)
		}
		events := make([]event.PaymentSucceeded, 1+rng.IntN(6))
		for i := range events {
			m := loadMerchant(rng.IntN(10))
			events[i] = event.PaymentSucceeded{EventID: fmt.Sprintf("evt-%d-%d-%d", w, b, i), PaymentID: "pay",
				MerchantID: m, Amount: int64(1 + rng.IntN(5)), Source: event.SourcePC, OccurredAt: time.Now().UTC()}
		}
		if b%10 == 9 {
			events = append(events, last...) // a redelivery: duplicates
		}
		res, err := d.Apply(ctx, events)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Outcome == deduct.Applied {
				applied.Add(1)
			}
		}
		last = events
	}
	return nil
}

func loadMerchant(i int) string { return fmt.Sprintf("m-load-%02d", i) }

// assertExact checks the end state: every hash equals its balance row with no
// pending field, and a final run finds nothing but (after grants) missing keys.
func assertExact(t *testing.T, e *env, merchants int) {
	t.Helper()
	for i := range merchants {
		m := loadMerchant(i)
		var credited, debited int64
		if err := e.my.SQL.QueryRow("SELECT credited, debited FROM merchant_balance WHERE merchant_id = ?", m).Scan(&credited, &debited); err != nil {
			t.Fatal(err)
		}
		q := e.quota(m)
		if len(q) > 0 && (q["remain"] != fmt.Sprint(credited-debited) || len(q) != 2) {
			t.Errorf("%s: hash %v, balance %d", m, q, credited-debited)
		}
	}
	r, _ := e.reconciler(Config{})
	for _, f := range mustRun(t, r).Findings {
		if f.Kind != KindMissingKey {
			t.Errorf("final run: %+v", f)
		}
	}
}

// snowflakeIDs issues time-ordered Snowflake-layout ids (worker 0), as
// internal/idgen does in production.
type snowflakeIDs struct {
	mu   sync.Mutex
	last int64
}

func (s *snowflakeIDs) NextIDs(dst []int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range dst {
		id := (time.Now().UnixMilli() - idgen.EpochUnixMilli) << (idgen.WorkerBits + idgen.SequenceBits)
		if id <= s.last {
			id = s.last + 1
		}
		s.last, dst[i] = id, id
	}
	return nil
}
