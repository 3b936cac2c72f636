package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

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
			l, err := c.Wait(ctx, []string{key}, time.Minute)
			if l != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, tt.want) || !errors.Is(err, ctx.Err()) {
				t.Fatalf("Wait = %v, %v; want ErrNotObtained and %v", l, err, tt.want)
			}
		})
	}
	if got := metric(t, reg, "billing_lock_wait_seconds", map[string]string{"result": "not_obtained"}); got != 3 {
		t.Fatalf("wait histogram count = %v, want 3", got)
	}
}

// A lock that is never released expires, and the waiter gets it then.
func TestWaitForExpiredLock(t *testing.T) {
	r, c, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := r.Keys.Lock("m-1")
	expiring(t, c, key, 200*time.Millisecond)
	l, err := c.Wait(ctx, []string{key}, time.Minute)
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
		_, err := c.Wait(ctx, []string{key}, time.Minute)
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
		cs[i], _ = newClient(t, r.Client, lock.Options{})
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
			for range perG {
				l, err := c.Wait(gctx, []string{key}, 30*time.Second)
				if err != nil {
					return err
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

// Wait keeps the keys before the one it waits for, holds none beyond it, and
// finishes soon after that key is released (it polls).
func TestWaitWaitsInOrder(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	keys := lockKeys(r, "m-3", "m-1", "m-2") // taken in sorted order: m-1, m-2, m-3
	holder, err := c.Obtain(ctx, keys[2], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *lock.Lock
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Wait(ctx, keys, time.Minute)
		done <- result{l, err, time.Now()}
	}()

	deadline := time.Now().Add(5 * time.Second)
	for r.Client.Exists(ctx, keys[1]).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Wait never took the first key")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // it is waiting for m-2 now
	if n := r.Client.Exists(ctx, keys[0]).Val(); n != 0 {
		t.Fatal("Wait holds a key beyond the one it waits for")
	}
	select {
	case res := <-done:
		t.Fatalf("Wait returned while a key was held: %v", res.err)
	default:
	}

	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if d := res.at.Sub(released); d > time.Second {
		t.Fatalf("Wait took %v after the release", d)
	}
	for _, k := range keys {
		if got := r.Client.Get(ctx, k).Val(); got != res.l.Token() {
			t.Fatalf("%s = %q, want the token", k, got)
		}
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "wait", "result": "obtained"}); got != 1 {
		t.Fatalf("wait obtained = %v, want 1", got)
	}
	if err := res.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWaitGivesUpAndHoldsNothing(t *testing.T) {
	r, c, _ := setup(t)
	keys := lockKeys(r, "m-1", "m-2", "m-3")
	holder, err := c.Obtain(context.Background(), keys[1], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l, err := c.Wait(ctx, keys, time.Minute)
	if l != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, %v; want ErrNotObtained and DeadlineExceeded", l, err)
	}
	for _, k := range []string{keys[0], keys[2]} {
		if n := r.Client.Exists(context.Background(), k).Val(); n != 0 {
			t.Fatalf("%s is still held after Wait gave up", k)
		}
	}
}

// Callers wanting overlapping sets of keys, in any order, with one Wait for
// the set or one Wait per key in sorted order, never deadlock and never hold
// a key at the same time.
func TestWaitOverlappingSets(t *testing.T) {
	r := testenv.NewRedis(t)
	const goroutines, rounds, nkeys = 16, 100, 8
	clients := make([]*lock.Client, 4)
	for i := range clients {
		clients[i], _ = newClient(t, r.Client, lock.Options{})
	}
	all := make([]string, nkeys)
	for i := range all {
		all[i] = r.Keys.Lock(fmt.Sprintf("m-%d", i))
	}
	var holders [nkeys]atomic.Int32
	var overlaps atomic.Int32

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for i := range goroutines {
		c := clients[i%len(clients)]
		g.Go(func() error {
			for range rounds {
				var pick []int
				for k := range nkeys {
					if rand.IntN(3) == 0 {
						pick = append(pick, k)
					}
				}
				if len(pick) == 0 {
					continue
				}
				rand.Shuffle(len(pick), func(a, b int) { pick[a], pick[b] = pick[b], pick[a] })
				keys := make([]string, len(pick))
				for j, k := range pick {
					keys[j] = all[k]
				}
				var locks []*lock.Lock
				if i%4 == 3 { // one key after another, in sorted order
					slices.Sort(keys)
					for _, k := range keys {
						l, err := c.Wait(gctx, []string{k}, 30*time.Second)
						if err != nil {
							return err
						}
						locks = append(locks, l)
					}
				} else {
					l, err := c.Wait(gctx, keys, 30*time.Second)
					if err != nil {
						return err
					}
					locks = append(locks, l)
				}
				for _, k := range pick {
					if holders[k].Add(1) != 1 {
						overlaps.Add(1)
					}
				}
				runtime.Gosched()
				for _, k := range pick {
					holders[k].Add(-1)
				}
				for _, l := range locks {
					if err := l.Release(gctx); err != nil {
						return err
					}
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
}
