package deduct

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
)

// Workers whose batches share merchants, and grants to those merchants, take
// their locks through internal/lock: no deadlock, no lost or double deduction,
// and the ledger, the balances and Redis agree at the end.
func TestApplyWithProductionLocks(t *testing.T) {
	e := newEnv(t)
	const merchants, workers, batches, perBatch = 12, 8, 15, 24
	for i := range merchants {
		e.grant(fmt.Sprintf("m-%d", i), 1_000_000)
	}
	locks := newTestLocker(t, e.redis.Client, e.redis.Keys, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	var total [workers]int64
	for w := range workers {
		d, err := New(e.redis.Client, e.redis.Keys, locks, e.store, nil, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		g.Go(func() error {
			for b := range batches {
				evs := make([]event.PaymentSucceeded, perBatch)
				for i := range evs {
					amount := int64(1 + rand.IntN(5))
					evs[i] = pay(fmt.Sprintf("w%d-b%d-e%d", w, b, i), fmt.Sprintf("m-%d", rand.IntN(merchants)), amount)
					total[w] += amount
				}
				res, err := d.Apply(gctx, evs)
				if err != nil {
					return err
				}
				for i, r := range res {
					if r.Outcome != Applied {
						return fmt.Errorf("event %s: outcome %+v", evs[i].EventID, r)
					}
				}
			}
			return nil
		})
	}
	granter, err := New(e.redis.Client, e.redis.Keys, locks, e.store, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error {
		for i := range 3 * batches {
			m := fmt.Sprintf("m-%d", rand.IntN(merchants))
			if _, err := granter.Grant(gctx, m, 10, fmt.Sprintf("g-%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, n := range total {
		want += n
	}
	sums, err := e.sums(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var debited int64
	for _, s := range sums {
		debited += s.Debited
	}
	if debited != want {
		t.Errorf("ledger debits = %d, want %d", debited, want)
	}
	e.checkConsistent()
	for i := range merchants {
		if n := e.redis.Client.Exists(context.Background(), e.redis.Keys.Lock(fmt.Sprintf("m-%d", i))).Val(); n != 0 {
			t.Errorf("lock of m-%d still held", i)
		}
	}
}

// One lock of a batch lost mid-batch (the key deleted): the batch's one
// watchdog cancels the batch's context within TTL/3 plus a round trip, so
// nothing is committed; Apply reports ErrLockLost and releases the other locks.
func TestBatchLockLossCancelsBatch(t *testing.T) {
	e := newEnv(t)
	for _, m := range []string{"m-a", "m-b", "m-c"} {
		e.grant(m, 100)
	}
	const ttl = 600 * time.Millisecond
	d, err := New(e.redis.Client, e.redis.Keys, newTestLocker(t, e.redis.Client, e.redis.Keys, ttl), e.store, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.afterStep = func(step string) error {
		if step == stepDeducted {
			e.redis.Client.Del(ctx, e.redis.Keys.Lock("m-b"))
			time.Sleep(ttl/3 + 200*time.Millisecond) // the next renewal finds it gone
		}
		return nil
	}
	_, err = d.Apply(ctx, []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e2", "m-b", 1), pay("e3", "m-c", 1)})
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Apply = %v, want ErrLockLost caused by lock.ErrLost", err)
	}
	if ex, err := e.store.ExistingEvents(ctx, []string{"e1", "e2", "e3"}); err != nil || len(ex) != 0 {
		t.Fatalf("ledger rows of a batch that lost a lock: %v, %v", ex, err)
	}
	for _, m := range []string{"m-a", "m-b", "m-c"} {
		if n := e.redis.Client.Exists(ctx, e.redis.Keys.Lock(m)).Val(); n != 0 {
			t.Errorf("lock of %s still held after the batch", m)
		}
		if b := e.balance(m); b.Debited != 0 {
			t.Errorf("%s debited %d", m, b.Debited)
		}
	}

	// Applied again (the caller retries a transient error): as if nothing happened.
	d.afterStep = nil
	res, err := d.Apply(ctx, []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e2", "m-b", 1), pay("e3", "m-c", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got[0] != Applied || got[1] != Applied || got[2] != Applied {
		t.Fatalf("outcomes = %v", got)
	}
	var rows []ledger.Row
	if err := e.mysql.DB.Where("kind = ?", ledger.KindDebit).Find(&rows).Error; err != nil || len(rows) != 3 {
		t.Fatalf("debit rows = %d, %v; want 3", len(rows), err)
	}
	e.checkConsistent()
}
