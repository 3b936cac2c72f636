package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// A merchant whose lock a worker holds is skipped as busy and left alone; the
// next run, with the lock free, repairs it.
func TestBusyMerchantIsSkipped(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-busy", 10, 0)
	e.merchant("m-free", 10, 0)
	e.setQuota("m-busy", 99, 1)
	e.setQuota("m-free", 10, 1)
	held, err := e.locks.Obtain(e.ctx, e.redis.Keys.Lock("m-busy"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, reg := e.reconciler(Config{})
	rep := mustRun(t, r)
	if rep.Busy != 1 || !reflect.DeepEqual(rep.BusyMerchants, []string{"m-busy"}) || rep.Checked != 1 || rep.Clean != 1 ||
		len(rep.Findings) != 0 || rep.Status != StatusClean {
		t.Fatalf("report %+v", rep)
	}
	if e.quota("m-busy")["remain"] != "99" {
		t.Fatal("busy merchant touched")
	}
	if got := gauge(t, reg, "billing_reconcile_busy_skips_total"); got != 1 {
		t.Fatalf("busy metric %v", got)
	}
	if n := e.count("SELECT busy_skipped FROM reconcile_runs WHERE id = ?", rep.RunID); n != 1 {
		t.Fatalf("busy_skipped stored %d", n)
	}
	if err := held.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	rep = mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-busy redis_high": ActionRepaired}) || rep.Busy != 0 {
		t.Fatalf("after release: %v %+v", got, rep)
	}
}

// A merchant busy during the pass is tried once more at the end of the run.
func TestBusyMerchantIsRetriedOnce(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 10, 0)
	e.setQuota("m-1", 12, 1)
	held, err := e.locks.Obtain(e.ctx, e.redis.Keys.Lock("m-1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e.reconciler(Config{BusyRetryDelay: 300 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(50 * time.Millisecond) // the worker finishes while the run waits to retry
		_ = held.Release(context.Background())
	}()
	rep := mustRun(t, r)
	wg.Wait()
	if rep.Busy != 0 || rep.Checked != 1 || rep.Repaired != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// A ver bump between the read and the repair (a mutation the lock did not
// stop) aborts the repair; nothing is written, and the next run repairs.
func TestVersionBumpAbortsRepair(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 10, 0)
	e.setQuota("m-1", 15, 3)
	r, _ := e.reconciler(Config{})
	r.beforeApply = func(m string) {
		if err := e.redis.Client.HIncrBy(e.ctx, e.redis.Keys.Quota(m), "ver", 1).Err(); err != nil {
			t.Error(err)
		}
	}
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-1 redis_high": ActionAborted}) ||
		rep.Status != StatusDrift || rep.Repaired != 0 {
		t.Fatalf("%v %+v", got, rep)
	}
	if q := e.quota("m-1"); q["remain"] != "15" || q["ver"] != "4" {
		t.Fatalf("aborted repair wrote: %v", q)
	}
	r.beforeApply = nil
	if rep := mustRun(t, r); rep.Repaired != 1 || e.quota("m-1")["remain"] != "10" {
		t.Fatalf("retry: %+v %v", rep, e.quota("m-1"))
	}
}

// A lock lost between the read and the repair (expired and taken by a worker)
// aborts the repair: the fencing token no longer matches.
func TestLostLockAbortsRepair(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 10, 0)
	r, _ := e.reconciler(Config{})
	r.beforeApply = func(m string) {
		if err := e.redis.Client.Set(e.ctx, e.redis.Keys.Lock(m), "a-worker", time.Minute).Err(); err != nil {
			t.Error(err)
		}
	}
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-1 missing_key": ActionAborted}) {
		t.Fatalf("%v", got)
	}
	if len(e.quota("m-1")) != 0 {
		t.Fatal("hydrated without the lock")
	}
}

// Two reconcilers running at once on the same drift repair each merchant
// exactly once, and the final state is exact.
func TestConcurrentReconcilersRepairOnce(t *testing.T) {
	e := newEnv(t)
	const n = 60
	old := time.Now().Add(-time.Hour)
	for i := range n {
		m := fmt.Sprintf("m-%03d", i)
		e.merchant(m, 1000, 100)
		switch i % 3 {
		case 0:
			e.setQuota(m, 950, 1)
		case 1:
			e.setQuota(m, 880, 1, "evt-orphan-"+m, 20, old)
		}
	}
	var reps [2]*Report
	var wg sync.WaitGroup
	for i := range reps {
		r, _ := e.reconciler(Config{PageSize: 7, Concurrency: 3})
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i] = r.Run(context.Background())
		}()
	}
	wg.Wait()
	repairs := map[string]int{}
	for _, rep := range reps {
		if rep.Err() != nil {
			t.Fatal(rep.Err())
		}
		for _, f := range rep.Findings {
			if f.Action == ActionRepaired {
				repairs[f.MerchantID]++
			}
		}
	}
	t.Logf("reconciler A: repaired %d merchants, %d busy after retry; B: repaired %d, %d busy",
		reps[0].Repaired, reps[0].Busy, reps[1].Repaired, reps[1].Busy)
	if len(repairs) != n {
		t.Fatalf("%d merchants repaired, want %d (busy: %d, %d)", len(repairs), n, reps[0].Busy, reps[1].Busy)
	}
	for i := range n {
		m := fmt.Sprintf("m-%03d", i)
		if repairs[m] != 1 {
			t.Errorf("%s repaired %d times", m, repairs[m])
		}
		if q := e.quota(m); q["remain"] != "900" || len(q) != 2 {
			t.Errorf("%s = %v", m, q)
		}
	}
	if stored := e.count("SELECT COUNT(DISTINCT merchant_id) FROM reconcile_findings WHERE action = 'repaired'"); stored != n {
		t.Fatalf("audit has repairs for %d merchants", stored)
	}
}
