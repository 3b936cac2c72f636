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

func lockKeys(r *testenv.Redis, merchants ...string) []string {
	keys := make([]string, len(merchants))
	for i, m := range merchants {
		keys[i] = r.Keys.Lock(m)
	}
	return keys
}

func TestObtainManyAndReleaseMany(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	keys := lockKeys(r, "m-1", "m-2", "m-3", "m-4")
	other, err := c.Obtain(ctx, keys[2], time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	locks, err := c.ObtainMany(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != len(keys) || locks[2] != nil {
		t.Fatalf("ObtainMany = %v, want 4 entries with nil for the held key", locks)
	}
	for i, l := range locks {
		if i == 2 {
			continue
		}
		if l.Key() != keys[i] {
			t.Fatalf("lock %d has key %q, want %q", i, l.Key(), keys[i])
		}
		if got := r.Client.Get(ctx, keys[i]).Val(); got != l.Token() {
			t.Fatalf("%s = %q, want the token", keys[i], got)
		}
		if ttl := r.Client.PTTL(ctx, keys[i]).Val(); ttl <= 59*time.Second {
			t.Fatalf("%s PTTL = %v, want about 1m", keys[i], ttl)
		}
	}
	if got := r.Client.Get(ctx, keys[2]).Val(); got != other.Token() {
		t.Fatalf("held key = %q, want the other holder's token", got)
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "try", "result": "obtained"}); got != 4 {
		t.Fatalf("obtained = %v, want 4 (1 + 3)", got)
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "try", "result": "not_obtained"}); got != 1 {
		t.Fatalf("not_obtained = %v, want 1", got)
	}

	// One of them is taken away: ReleaseMany releases the others and names it.
	r.Client.Set(ctx, keys[3], "someone-else", time.Minute)
	err = c.ReleaseMany(ctx, locks)
	if !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("ReleaseMany = %v, want ErrNotHeld for the stolen lock", err)
	}
	for _, k := range keys[:2] {
		if r.Client.Exists(ctx, k).Val() != 0 {
			t.Fatalf("%s still exists after ReleaseMany", k)
		}
	}
	if got := r.Client.Get(ctx, keys[3]).Val(); got != "someone-else" {
		t.Fatalf("stolen key = %q: ReleaseMany touched it", got)
	}
	select {
	case <-locks[3].Lost():
	default:
		t.Fatal("Lost() of the stolen lock not closed")
	}
	if err := c.ReleaseMany(ctx, locks[:1]); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second ReleaseMany = %v, want ErrNotHeld", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestManyRejectBadArguments(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	k := r.Keys.Lock("m-1")
	for _, tt := range []struct {
		name string
		keys []string
		ttl  time.Duration
	}{
		{"empty key", []string{k, ""}, time.Second},
		{"key twice", []string{k, r.Keys.Lock("m-2"), k}, time.Second},
		{"zero ttl", []string{k}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.ObtainMany(ctx, tt.keys, tt.ttl); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("ObtainMany: err = %v, want a usage error", err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := c.WaitMany(wctx, tt.keys, tt.ttl); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("WaitMany: err = %v, want a usage error", err)
			}
		})
	}
	if n := r.Client.Exists(ctx, k).Val(); n != 0 {
		t.Fatal("a refused call left a lock behind")
	}
}

// WaitMany keeps the prefix it got, gives back what lies beyond the key it
// waits for (so it never holds a later key while waiting), and finishes once
// that key is released.
func TestWaitManyWaitsInOrder(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	keys := lockKeys(r, "m-1", "m-2", "m-3")
	holder, err := c.Obtain(ctx, keys[1], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		locks []*lock.Lock
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ls, err := c.WaitMany(ctx, keys, time.Minute)
		done <- result{ls, err}
	}()

	deadline := time.Now().Add(5 * time.Second)
	for r.Client.Exists(ctx, keys[0]).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("WaitMany never took the first key")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // it is waiting for keys[1] now
	if n := r.Client.Exists(ctx, keys[2]).Val(); n != 0 {
		t.Fatal("WaitMany holds a key beyond the one it waits for")
	}
	select {
	case res := <-done:
		t.Fatalf("WaitMany returned while a key was held: %v", res.err)
	default:
	}

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	for i, l := range res.locks {
		if l.Key() != keys[i] || r.Client.Get(ctx, keys[i]).Val() != l.Token() {
			t.Fatalf("lock %d: key %q, value %q; want %q held", i, l.Key(), r.Client.Get(ctx, keys[i]).Val(), keys[i])
		}
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "wait", "result": "obtained"}); got != 3 {
		t.Fatalf("wait obtained = %v, want 3", got)
	}
	if err := c.ReleaseMany(ctx, res.locks); err != nil {
		t.Fatal(err)
	}
}

func TestWaitManyGivesUpAndHoldsNothing(t *testing.T) {
	r, c, _ := setup(t)
	keys := lockKeys(r, "m-1", "m-2", "m-3")
	holder, err := c.Obtain(context.Background(), keys[1], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ls, err := c.WaitMany(ctx, keys, time.Minute)
	if ls != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitMany = %v, %v; want ErrNotObtained and DeadlineExceeded", ls, err)
	}
	for _, k := range []string{keys[0], keys[2]} {
		if n := r.Client.Exists(context.Background(), k).Val(); n != 0 {
			t.Fatalf("%s is still held after WaitMany gave up", k)
		}
	}
}

// Callers wanting overlapping sets of keys, in sorted order, with WaitMany or
// with Wait one key after another, never deadlock and never hold a key at the
// same time.
func TestWaitManyOverlappingSets(t *testing.T) {
	r := testenv.NewRedis(t)
	const goroutines, rounds, nkeys = 16, 100, 8
	clients := make([]*lock.Client, 4)
	for i := range clients {
		clients[i], _ = newClient(t, r.Client, r.Keys, lock.Options{})
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
				keys := make([]string, len(pick))
				for j, k := range pick {
					keys[j] = all[k]
				}
				slices.Sort(keys)
				var locks []*lock.Lock
				if i%4 == 3 { // one key after another, as a Locker without WaitMany does
					for _, k := range keys {
						l, err := c.Wait(gctx, k, 30*time.Second)
						if err != nil {
							return err
						}
						locks = append(locks, l)
					}
				} else {
					var err error
					if locks, err = c.WaitMany(gctx, keys, 30*time.Second); err != nil {
						return err
					}
				}
				wctx := c.WatchMany(gctx, locks)
				for _, k := range pick {
					if holders[k].Add(1) != 1 {
						overlaps.Add(1)
					}
				}
				runtime.Gosched()
				for _, k := range pick {
					holders[k].Add(-1)
				}
				if err := c.ReleaseMany(gctx, locks); err != nil {
					return err
				}
				if wctx.Err() == nil {
					return errors.New("the watched context outlived the release")
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
