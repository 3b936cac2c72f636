package lock_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestWaitGivesUpWithContext(t *testing.T) {
	r, c, reg := setup(t)
	key := r.Keys.Lock("m-1")
	held, err := c.Obtain(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())

	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"already cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			l, err := c.Wait(ctx, key, time.Minute)
			if l != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, tt.want) || !errors.Is(err, ctx.Err()) {
				t.Fatalf("Wait = %v, %v; want ErrNotObtained and %v", l, err, tt.want)
			}
		})
	}
	if got := metric(t, reg, "billing_lock_wait_seconds", map[string]string{"result": "not_obtained"}); got != 3 {
		t.Fatalf("wait histogram count = %v, want 3", got)
	}
}

// A release wakes a waiter by notification: polling is set far beyond the
// test's patience, so only the PUBLISH can explain a quick handoff.
func TestWaitWokenByRelease(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "same client", false: "other client"}[shared]
		t.Run(name, func(t *testing.T) {
			r, holder, _ := setup(t)
			noPoll := lock.Options{RetryMin: time.Hour, RetryMax: time.Hour}
			waiter, reg := newClient(t, r.Client, r.Keys, noPoll)
			if shared {
				holder = waiter
			}
			ctx := context.Background()
			key := r.Keys.Lock("m-1")
			held, err := holder.Obtain(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}

			type result struct {
				l   *lock.Lock
				err error
				at  time.Time
			}
			done := make(chan result, 1)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			go func() {
				l, err := waiter.Wait(wctx, key, time.Minute)
				done <- result{l, err, time.Now()}
			}()
			time.Sleep(200 * time.Millisecond) // the waiter is subscribed by now
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			if d := res.at.Sub(released); d > 2*time.Second {
				t.Fatalf("handoff took %v: the release notification was missed", d)
			}
			if err := res.l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "wait", "result": "obtained"}); got != 1 {
				t.Fatalf("wait obtained = %v, want 1", got)
			}
		})
	}
}

// A lock that expires is never announced: the waiter gets it by polling.
func TestWaitPollsForExpiredLock(t *testing.T) {
	r, c, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := r.Keys.Lock("m-1")
	if _, err := c.Obtain(ctx, key, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	l, err := c.Wait(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Wait for an expiring lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCloseStopsWaiters(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")
	held, err := c.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Wait(ctx, key, time.Minute)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("Wait after Close: err = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	if _, err := c.Obtain(ctx, r.Keys.Lock("m-2"), time.Minute); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Obtain after Close: err = %v, want ErrClosed", err)
	}
	// Locks already held keep working.
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// 64 goroutines over four Clients (four "workers") contend for one lock. An
// in-process counter that only a lock holder touches proves that no two
// holders ever overlap: holders must never exceed one, and the unguarded
// read-yield-write counter must lose no increment.
func TestMutualExclusion(t *testing.T) {
	r := testenv.NewRedis(t)
	const goroutines, clients = 64, 4
	perG := max((*totalCycles+goroutines-1)/goroutines, 1)
	t.Logf("%d goroutines x %d cycles = %d acquisitions (flag -lock.total)", goroutines, perG, goroutines*perG)

	var cs [clients]*lock.Client
	for i := range cs {
		cs[i], _ = newClient(t, r.Client, r.Keys, lock.Options{})
	}
	key := r.Keys.Lock("m-hot")
	var holders, overlaps atomic.Int32
	var counter atomic.Int64

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for i := range goroutines {
		c := cs[i%clients]
		g.Go(func() error {
			for j := range perG {
				l, err := c.Wait(gctx, key, 30*time.Second)
				if err != nil {
					return err
				}
				if j%16 == 0 {
					l.Watch(gctx) // mix the watchdog in
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				runtime.Gosched()
				counter.Store(v + 1)
				holders.Add(-1)
				if err := l.Release(gctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping holders", n)
	}
	if got, want := counter.Load(), int64(goroutines*perG); got != want {
		t.Fatalf("counter = %d, want %d: holders overlapped", got, want)
	}
}

// The shared subscription survives a dropped connection: go-redis subscribes
// again, and a release published while it was down is made up for by waking
// the waiters once they are subscribed again. Polling is disabled, so only
// notifications can hand the lock over.
func TestWaitSurvivesDroppedSubscription(t *testing.T) {
	s := testenv.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { rdb.Close() })
	keys, err := keyspace.New("locktest:")
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := newClient(t, rdb, keys, lock.Options{})
	waiter, _ := newClient(t, rdb, keys, lock.Options{RetryMin: time.Hour, RetryMax: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, pause := range []time.Duration{300 * time.Millisecond, 0} {
		key := keys.Lock("m-1")
		held, err := holder.Obtain(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := waiter.Wait(ctx, key, time.Minute)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(200 * time.Millisecond)
		if n, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n == 0 {
			t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v", n, err)
		}
		time.Sleep(pause) // 0: release while the subscription is being restored
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("pause %v: waiter never woken after the subscription dropped", pause)
		}
	}
}

// With polling disabled, notifications alone must hand the lock over every
// time, among waiters of one Client (where a release wakes only one of them),
// also while some waiters give up. A stranded waiter fails the test at the
// deadline. (TestNotifierWakesOneAndPassesOn checks the hand-on itself.)
func TestNotificationsAloneHandOver(t *testing.T) {
	r := testenv.NewRedis(t)
	noPoll := lock.Options{RetryMin: time.Hour, RetryMax: time.Hour}
	const goroutines, clients, perG = 16, 1, 100
	var cs [clients]*lock.Client
	for i := range cs {
		cs[i], _ = newClient(t, r.Client, r.Keys, noPoll)
	}
	key := r.Keys.Lock("m-hot")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for i := range goroutines {
		c := cs[i%clients]
		g.Go(func() error {
			for j := range perG {
				if i%4 == 0 && j%10 == 0 {
					// A waiter that gives up must pass its wake-up on.
					short, cancel := context.WithTimeout(gctx, time.Millisecond)
					l, err := c.Wait(short, key, time.Minute)
					cancel()
					if err == nil {
						if err := l.Release(gctx); err != nil {
							return err
						}
					} else if !errors.Is(err, lock.ErrNotObtained) {
						return err
					}
				}
				l, err := c.Wait(gctx, key, time.Minute)
				if err != nil {
					return err
				}
				if err := l.Release(gctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
