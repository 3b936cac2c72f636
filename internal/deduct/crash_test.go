package deduct

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
)

var errKilled = errors.New("killed")

var crashMerchants = []string{"m-a", "m-b", "m-c", "m-x"}

// crashSetup: m-a and m-b warm in Redis, m-c known but not cached, m-x unknown.
func crashSetup(e *env) {
	e.grant("m-a", 10)
	e.grant("m-b", 5)
	e.grant("m-c", 3)
	e.apply(e.d, []event.PaymentSucceeded{pay("w-a", "m-a", 1), pay("w-b", "m-b", 1)})
}

func crashBatch() []event.PaymentSucceeded {
	return []event.PaymentSucceeded{
		pay("e1", "m-a", 4), // applied, 5 left
		pay("e2", "m-b", 2), // applied, 2 left
		pay("e3", "m-a", 7), // insufficient
		pay("e4", "m-c", 1), // applied after hydration, 2 left
		pay("e5", "m-x", 1), // unknown merchant
		pay("e6", "m-b", 2), // applied, 0 left
		pay("e7", "m-a", 5), // applied, 0 left
		pay("e8", "m-b", 1), // insufficient
	}
}

// TestCrashBetweenSteps kills the batch after each step (the process stops
// there: no release, no cleanup), then a fresh Deductor receives the same
// events again, once as the same batch and once split in two. The end state
// must be exactly that of a run without the kill.
func TestCrashBetweenSteps(t *testing.T) {
	base := newEnv(t)
	crashSetup(base)
	base.apply(base.d, crashBatch())
	want := base.snapshot(crashMerchants...)
	base.checkConsistent()

	for _, step := range []string{stepLocked, stepDeducted, stepCommitted, stepConfirmed} {
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", step, split), func(t *testing.T) {
				e := newEnv(t)
				crashSetup(e)
				dying := e.newDeductor()
				dying.afterStep = func(s string) error {
					if s == step {
						return errKilled
					}
					return nil
				}
				if _, err := dying.Apply(context.Background(), crashBatch()); !errors.Is(err, errKilled) {
					t.Fatalf("Apply with a kill after %s = %v", step, err)
				}
				ctx := context.Background()
				locks := []string{e.redis.Keys.Lock("m-a"), e.redis.Keys.Lock("m-b"), e.redis.Keys.Lock("m-c"), e.redis.Keys.Lock("m-x")}
				if n, _ := e.redis.Client.Exists(ctx, locks...).Result(); n != 4 {
					t.Fatalf("%d of the killed batch's 4 locks are left; a kill releases nothing", n)
				}
				// The dead holder's locks expire (TTL), without its help.
				if err := e.redis.Client.Del(ctx, locks...).Err(); err != nil {
					t.Fatal(err)
				}

				again := e.newDeductor()
				batch := crashBatch()
				if split {
					e.apply(again, batch[:3])
					e.apply(again, batch[3:])
				} else {
					e.apply(again, batch)
				}
				if got := e.snapshot(crashMerchants...); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("state after a kill after %s and a redelivery:\n got %v\nwant %v", step, got, want)
				}
				e.checkConsistent()
			})
		}
	}
}

// TestFencedScriptsRefuseAnotherHolder: the lock changes hands before the
// deduction; the script sees another token and writes nothing.
func TestFencedScriptsRefuseAnotherHolder(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("e0", "m-a", 1)})
	ctx := context.Background()
	lockKey := e.redis.Keys.Lock("m-a")
	e.d.afterStep = func(s string) error {
		if s == stepLocked {
			// Our lock expired and another worker took it.
			return e.redis.Client.Set(ctx, lockKey, "someone-else", time.Minute).Err()
		}
		return nil
	}
	_, err := e.d.Apply(ctx, []event.PaymentSucceeded{pay("e1", "m-a", 3)})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("Apply = %v, want ErrLockLost", err)
	}
	remain, pending := e.quota("m-a")
	if remain != 9 || len(pending) != 0 {
		t.Errorf("a fenced-out deduction wrote: remain %d pending %v", remain, pending)
	}
	if got, _ := e.redis.Client.Get(ctx, lockKey).Result(); got != "someone-else" {
		t.Errorf("the other holder's lock was touched: %q", got)
	}
	if n := counterValue(t, e.d.metrics.lockLost); n != 1 {
		t.Errorf("lock lost metric = %v", n)
	}
	if n := counterValue(t, e.d.metrics.fenced.WithLabelValues("deduct")); n != 1 {
		t.Errorf("fenced deductions = %v, want 1", n)
	}

	e.redis.Client.Del(ctx, lockKey)
	e.d.afterStep = nil
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 3)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 6 {
		t.Errorf("redelivery = %+v", res[0])
	}
	e.checkConsistent()
}

// TestLockLostAbortsBatch: the lock's context ends (its watchdog found it
// gone) after the deduction; the MySQL transaction must not run, and a
// redelivery must reuse the deduction rather than repeat it.
func TestLockLostAbortsBatch(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("e0", "m-a", 1)})
	batch := []event.PaymentSucceeded{pay("e1", "m-a", 3), pay("e2", "m-b", 4)}
	e.d.afterStep = func(s string) error {
		if s == stepDeducted {
			e.locker.held("m-b").lost()
		}
		return nil
	}
	_, err := e.d.Apply(context.Background(), batch)
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("Apply = %v, want ErrLockLost", err)
	}
	if ex, _ := e.store.ExistingEvents(context.Background(), []string{"e1", "e2"}); len(ex) != 0 {
		t.Fatalf("rows written after the lock was lost: %v", ex)
	}
	if _, pending := e.quota("m-a"); len(pending) != 1 {
		t.Fatalf("pending after the abort = %v, want e1", pending)
	}

	e.d.afterStep = nil
	res := e.apply(e.newDeductor(), batch)
	if got := outcomes(res); got[0] != Applied || got[1] != Applied {
		t.Fatalf("redelivery = %v", got)
	}
	if remain, _ := e.quota("m-a"); remain != 6 {
		t.Errorf("m-a remain = %d, want 6 (deducted once)", remain)
	}
	e.checkConsistent()
}

// TestLockLostAfterCommit: the lock changes hands after the commit, so the
// fenced confirm refuses; the batch reports ErrLockLost (the caller retries)
// and the retry finds duplicates and clears the pending fields.
func TestLockLostAfterCommit(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	ctx := context.Background()
	lockKey := e.redis.Keys.Lock("m-a")
	e.d.afterStep = func(s string) error {
		if s == stepCommitted {
			return e.redis.Client.Set(ctx, lockKey, "someone-else", time.Minute).Err()
		}
		return nil
	}
	batch := []event.PaymentSucceeded{pay("e1", "m-a", 3)}
	if _, err := e.d.Apply(ctx, batch); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Apply = %v, want ErrLockLost", err)
	}
	e.redis.Client.Del(ctx, lockKey)
	e.d.afterStep = nil
	res := e.apply(e.d, batch)
	if res[0].Outcome != Duplicate || res[0].BalanceAfter != 7 {
		t.Errorf("retry = %+v, want a duplicate with 7 left", res[0])
	}
	e.checkConsistent()
}

// TestDropIsFenced: a cache drop (after MySQL refused what Redis allowed)
// under a lock now held by another worker deletes nothing; the fault suite's
// paused worker cannot time that moment, so its fencing is proved here.
func TestDropIsFenced(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("e0", "m-a", 1)})
	ctx := context.Background()
	lockKey := e.redis.Keys.Lock("m-a")
	if err := e.redis.Client.Set(ctx, lockKey, "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	err := e.d.drop(ctx, map[string]heldLock{"m-a": {key: lockKey, token: "ours-before"}}, "m-a")
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("drop = %v, want ErrLockLost", err)
	}
	if remain, _ := e.quota("m-a"); remain != 9 {
		t.Errorf("a fenced-out drop deleted the cache: remain %d", remain)
	}
	if n := counterValue(t, e.d.metrics.fenced.WithLabelValues("drop")); n != 1 {
		t.Errorf("fenced drops = %v, want 1", n)
	}
}
