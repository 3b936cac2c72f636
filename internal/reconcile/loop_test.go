package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/lock"
)

// Loop runs until its context ends, reports every run, and returns nil.
func TestLoopRunsUntilCancelled(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 10, 0)
	e.setQuota("m-1", 11, 1)
	r, reg := e.reconciler(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var statuses []Status
	err := r.Loop(ctx, 20*time.Millisecond, func(rep *Report) {
		statuses = append(statuses, rep.Status)
		if len(statuses) == 3 {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 3 || statuses[0] != StatusRepaired || statuses[1] != StatusClean || statuses[2] != StatusClean {
		t.Fatalf("statuses %v", statuses)
	}
	if n := e.count("SELECT COUNT(*) FROM reconcile_runs"); n != 3 {
		t.Fatalf("%d run rows", n)
	}
	if got := gauge(t, reg, "billing_reconcile_last_run_abs_drift"); got != 0 {
		t.Fatalf("last drift gauge %v after a clean run", got)
	}
}

// A run that cannot reach Redis fails (exit 3) and still leaves its run row.
func TestUnreachableRedisFailsTheRun(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 10, 0)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	lc, err := lock.New(dead, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	r, err := New(e.my.SQL, dead, e.redis.Keys, NewLocker(lc), Config{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(context.Background())
	if rep.Status != StatusFailed || rep.Err() == nil || rep.RunID == 0 {
		t.Fatalf("report %+v", rep)
	}
	var status, msg string
	if err := e.my.SQL.QueryRow("SELECT status, error FROM reconcile_runs WHERE id = ?", rep.RunID).Scan(&status, &msg); err != nil {
		t.Fatal(err)
	}
	if status != "failed" || !strings.Contains(msg, "127.0.0.1:1") {
		t.Fatalf("stored %q %q", status, msg)
	}
}
