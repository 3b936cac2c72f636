package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/writepath"
)

// Operator commands (billingctl quota grant) run in parallel: each leases its
// own worker ID of the pool for its lifetime, none waits for another's lease.
// One fixed ID made the second of two parallel grants wait a third of the
// lease TTL (10 s by default).
func TestParallelOperatorsDoNotSerialize(t *testing.T) {
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": r.Addr, "REDIS_KEY_PREFIX": r.Keys.Prefix(), "IDGEN_LEASE_TTL": "30s"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 6
	start := time.Now()
	ops := make([]*Operator, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			op, err := New(ctx, cfg, zaptest.NewLogger(t))
			if err != nil {
				errs <- err
				return
			}
			ops[i] = op
			m := fmt.Sprintf("m-%d", i)
			if _, err := op.Deductor.Grant(ctx, m, 100, "grant-"+m); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	ids := map[int]bool{}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, op := range ops {
			if op != nil {
				if err := op.Close(); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer closeAll()
	for _, op := range ops {
		if op != nil {
			ids[op.WorkerID] = true
		}
	}
	for err := range errs {
		t.Fatal(err)
	}
	// All six held their leases at once, each on its own ID of the pool.
	if len(ids) != n {
		t.Fatalf("worker IDs %v: want %d distinct", ids, n)
	}
	for id := range ids {
		if id < poolBase || id >= poolBase+poolSize {
			t.Fatalf("worker ID %d outside the operator pool", id)
		}
	}
	if took > 5*time.Second {
		t.Fatalf("%d parallel grants took %s: they waited for each other", n, took)
	}
	var credits int
	if err := db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE kind = 'credit'").Scan(&credits).Error; err != nil || credits != n {
		t.Fatalf("%d credit rows (%v), want %d", credits, err, n)
	}
	// A released ID is free again at once: a next command does not wait either.
	closeAll()
	start = time.Now()
	op, err := New(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a command after the others took %s to lease", took)
	}
}

// A reader starts with Redis unreachable and leases nothing; it reads MySQL,
// and a ledger row it would write fails before any is written.
func TestReaderNeedsNoLeaseNorRedis(t *testing.T) {
	db := testenv.NewMySQL(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": "127.0.0.1:1"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, err := NewReader(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if op.WorkerID != -1 {
		t.Fatalf("a reader holds worker ID %d", op.WorkerID)
	}
	if _, err := op.Plans.List(ctx); err != nil {
		t.Fatalf("read without Redis: %v", err)
	}
	if _, err := op.Ledger.Grant(ctx, []ledger.Credit{{ID: "g-1", MerchantID: "m-1", Source: "test", Amount: 5, Priority: 50, StartsAt: time.Now()}}); !errors.Is(err, writepath.ErrReadOnly) {
		t.Fatalf("a reader's credit = %v, want ErrReadOnly", err)
	}
	var rows int64
	if err := db.DB.Raw("SELECT COUNT(*) FROM quota_ledger").Scan(&rows).Error; err != nil || rows != 0 {
		t.Fatalf("%d ledger rows (%v) after a reader's write", rows, err)
	}
}
