package demo

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/reconcile"
)

// corruption is one deliberate lie told to Redis, as a failover that lost
// writes or an operator's slip would.
type corruption struct {
	merchant string
	kind     reconcile.Kind
}

// corrupt damages a few merchants' Redis balances while the workers are idle.
func (r *run) corrupt(ctx context.Context) error {
	merchants, err := r.loadedMerchants(ctx)
	if err != nil {
		return err
	}
	if len(merchants) < 6 {
		return fmt.Errorf("demo: only %d merchants have a Redis balance to corrupt", len(merchants))
	}
	rdb := r.st.Redis
	old := time.Now().Add(-10 * time.Minute)
	plan := []struct {
		kind reconcile.Kind
		do   func(key string) error
	}{
		{reconcile.KindRedisHigh, func(k string) error { return rdb.HIncrBy(ctx, k, quota.FieldRemain, 100).Err() }},
		{reconcile.KindRedisHigh, func(k string) error { return rdb.HIncrBy(ctx, k, quota.FieldRemain, 3).Err() }},
		{reconcile.KindRedisLow, func(k string) error { return rdb.HIncrBy(ctx, k, quota.FieldRemain, -7).Err() }},
		{reconcile.KindMissingKey, func(k string) error { return rdb.Del(ctx, k).Err() }},
		{reconcile.KindOrphanPending, func(k string) error {
			// A deduction whose worker died before its ledger row, long ago.
			if err := rdb.HSet(ctx, k, quota.PendingField("ghost-event"), quota.FormatPending(5, old)).Err(); err != nil {
				return err
			}
			return rdb.HIncrBy(ctx, k, quota.FieldRemain, -5).Err()
		}},
	}
	var names []string
	for i, c := range plan {
		m := merchants[i*len(merchants)/len(plan)]
		if err := c.do(r.keys.Quota(m)); err != nil {
			return fmt.Errorf("demo: corrupt %s: %w", m, err)
		}
		r.sum.Corrupted = append(r.sum.Corrupted, corruption{merchant: m, kind: c.kind})
		names = append(names, m+" "+string(c.kind))
	}
	r.say("corrupted %d Redis balances by hand: %s", len(plan), strings.Join(names, ", "))
	return nil
}

func (r *run) loadedMerchants(ctx context.Context) ([]string, error) {
	var out []string
	iter := r.st.Redis.Scan(ctx, 0, r.keys.QuotaPattern(), 1000).Iterator()
	for iter.Next(ctx) {
		if m, ok := r.keys.MerchantFromQuota(iter.Val()); ok {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out, iter.Err()
}

// reconcile runs the reconciler twice: the first pass must find and repair
// exactly the corruptions, the second must find nothing.
func (r *run) reconcile(ctx context.Context) error {
	return r.withReconciler(ctx, func(rc *reconcile.Reconciler) error {
		first := rc.Run(ctx)
		if err := first.Err(); err != nil {
			return fmt.Errorf("demo: reconciler: %w", err)
		}
		second := rc.Run(ctx)
		if err := second.Err(); err != nil {
			return fmt.Errorf("demo: reconciler, second pass: %w", err)
		}
		r.sum.Reconcile, r.sum.Recheck = first, second
		r.log.Debug("reconciled", zap.Int64("drifted", first.Drifted), zap.Int64("repaired", first.Repaired))
		return nil
	})
}

// hydrate loads the quota hashes refunds dropped (and no event loaded
// since), with a reconciler pass, so that there are balances to corrupt.
func (r *run) hydrate(ctx context.Context) error {
	if len(r.traffic.Refunds) == 0 {
		return nil
	}
	return r.withReconciler(ctx, func(rc *reconcile.Reconciler) error {
		if err := rc.Run(ctx).Err(); err != nil {
			return fmt.Errorf("demo: reconciler, hydrating: %w", err)
		}
		return nil
	})
}

// withReconciler runs fn with a reconciler of the run's database and Redis.
func (r *run) withReconciler(ctx context.Context, fn func(*reconcile.Reconciler) error) error {
	db, err := sql.Open("mysql", r.st.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	locks, err := lock.New(r.st.Redis, lock.Options{Logger: r.log})
	if err != nil {
		return err
	}
	defer locks.Close()
	rc, err := reconcile.New(db, r.st.Redis, r.keys, reconcile.NewLocker(locks), reconcile.Config{Grace: time.Minute, Logger: r.log})
	if err != nil {
		return err
	}
	return fn(rc)
}
