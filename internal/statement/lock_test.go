package statement_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/statement"
)

// shortTTL is short enough to outlive several times in a test, long enough that
// a loaded machine never delays a renewal past it.
const shortTTL = 500 * time.Millisecond

type result struct {
	sum statement.Summary
	err error
}

// held starts an export of the fixture's period that the proxy holds inside
// its snapshot, once it has its job lock; the export's result comes on the
// channel once the test resumes the proxy.
func held(t *testing.T, e *env, o statement.Options) (<-chan result, func()) {
	t.Helper()
	db, p := e.proxied(t)
	hit := p.PauseAt(rowsQuery)
	done := make(chan result, 1)
	go func() {
		sum, err := e.export(context.Background(), db, o)
		done <- result{sum, err}
	}()
	select {
	case <-hit:
	case r := <-done:
		t.Fatalf("the export ended before the proxy held it: %v", r.err)
	}
	t.Cleanup(p.Resume)
	return done, p.Resume
}

func jobKey(e *env, o statement.Options) string {
	return e.redis.Keys.ExportLock(statement.JobID(o.Period, o.Merchants))
}

// An export held for many TTLs keeps its job lock (the watchdog renews it),
// and a second export of the same job is refused meanwhile, or waits for it.
func TestExportOutlivesTTLs(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2"}, 4)
	o := statement.Options{Period: hours(2, 4), LockTTL: shortTTL}
	done, resume := held(t, e, o)
	key := jobKey(e, o)
	token, err := e.redis.Client.Get(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * shortTTL)
	if now, err := e.redis.Client.Get(t.Context(), key).Result(); err != nil || now != token {
		t.Fatalf("after 5 TTLs the job lock holds %q (%v), want the export's %q", now, err, token)
	}
	if _, err := e.export(t.Context(), e.db.SQL, o); !errors.Is(err, statement.ErrBusy) {
		t.Fatalf("a second export without --wait: %v, want ErrBusy", err)
	}
	other := o
	other.Merchants = []string{"m-1"}
	if _, err := e.export(t.Context(), e.db.SQL, other); err != nil {
		t.Fatalf("an export of another merchant set: %v", err)
	}
	waiting := make(chan result, 1)
	go func() {
		w := o
		w.Wait = time.Minute
		sum, err := e.export(context.Background(), e.db.SQL, w)
		waiting <- result{sum, err}
	}()
	resume()
	first := <-done
	if first.err != nil {
		t.Fatal(first.err)
	}
	records(t, first.sum.Path)
	second := <-waiting
	if second.err != nil {
		t.Fatalf("the export that waited: %v", second.err)
	}
	if !second.sum.AsOf.After(first.sum.AsOf) {
		t.Fatalf("the waiting export's snapshot (%v) is not after the first's (%v)", second.sum.AsOf, first.sum.AsOf)
	}
}

// A job lock taken away mid-export stops it: ErrLost, and neither the file
// nor its temporary is left.
func TestExportLockTakenAway(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2"}, 4)
	o := statement.Options{Period: hours(2, 4), LockTTL: shortTTL}
	done, _ := held(t, e, o)
	if err := e.redis.Client.Set(t.Context(), jobKey(e, o), "someone else", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-done // the watchdog finds the key not ours within TTL/3
	if !errors.Is(r.err, lock.ErrLost) {
		t.Fatalf("err = %v, want lock.ErrLost", r.err)
	}
	if f := files(t, e.dir); len(f) != 0 {
		t.Fatalf("left behind: %v", f)
	}
	if v, _ := e.redis.Client.Get(t.Context(), jobKey(e, o)).Result(); v != "someone else" {
		t.Fatalf("the key now holds %q: the lost export touched it", v)
	}
}
