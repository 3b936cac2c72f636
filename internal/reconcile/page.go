package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/quota"
)

// checkPage checks the quota hashes of merchants against MySQL, each under its
// lock, repairs them and adds what it got to t, also when it fails.
func (r *Reconciler) checkPage(ctx context.Context, merchants []string, t *tally) (err error) {
	var out Report
	defer func() { t.add(out) }()
	locks := make(map[string]*lock.Lock, len(merchants))
	defer r.releaseAll(ctx, locks)
	var locked, keys []string
	for _, m := range merchants {
		h, err := r.locks.Obtain(ctx, r.keys.Lock(m), r.cfg.LockTTL)
		switch {
		case errors.Is(err, lock.ErrNotObtained):
			out.BusyMerchants = append(out.BusyMerchants, m)
		case err != nil:
			return err
		default:
			locks[m] = h
			locked, keys = append(locked, m), append(keys, r.keys.Quota(m))
		}
	}
	hashes, err := quota.Read(ctx, r.rdb, keys)
	if err != nil {
		return err
	}
	var pending []string
	for _, h := range hashes {
		q, _ := quota.Parse(h) // a malformed hash is a finding of classify
		for _, p := range q.Pending {
			pending = append(pending, p.EventID)
		}
	}
	balances, debited, err := readTruth(ctx, r.db, locked, pending)
	if err != nil {
		return err
	}
	now := r.now()
	for i, m := range locked {
		b, ok := balances[m]
		if !ok {
			out.Unknown = append(out.Unknown, m)
			continue
		}
		confirmed := make(map[string]bool)
		for e, owner := range debited {
			if owner == m {
				confirmed[e] = true
			}
		}
		held := t.held(m)
		v := classify(merchantInput{ID: m, balance: b, Quota: hashes[i],
			Confirmed: confirmed, Held: held}, now, r.cfg)
		applied, err := r.execute(ctx, m, locks[m].Token(), &v)
		out.Findings = append(out.Findings, v.Findings...)
		if err != nil {
			return err
		}
		out.Checked++
		if !slices.ContainsFunc(v.Findings, func(f Finding) bool { return f.Kind.drift() }) && !held {
			out.Clean++
		}
		switch {
		case !applied:
		case v.Plan.Kind == planHydrate:
			out.Hydrated++
		default:
			out.Repaired++
		}
	}
	return nil
}

// execute runs the verdict's plan, if any, resolves its findings' actions and
// reports whether the plan was applied. A failed script call leaves the
// outcome unknown: the findings say aborted and the error ends the run.
func (r *Reconciler) execute(ctx context.Context, m, token string, v *verdict) (bool, error) {
	if v.Plan.Kind == planNone {
		return false, nil
	}
	if r.beforeApply != nil {
		r.beforeApply(m)
	}
	key, lockKey := r.keys.Quota(m), r.keys.Lock(m)
	c := &quota.Call{Script: r.repair, Keys: []string{key, lockKey}, Args: []any{token, v.Plan.ExpectVer, v.Plan.Remain}}
	if v.Plan.Kind == planHydrate {
		c = quota.Hydrate(key, lockKey, token, v.Plan.Remain, v.Plan.Floor, r.now())
	}
	for _, f := range v.Plan.Delete {
		c.Args = append(c.Args, f)
	}
	quota.Run(ctx, r.rdb, c)
	applied, err := c.Wrote()
	if err != nil && !errors.Is(err, quota.ErrNotHeld) {
		err = fmt.Errorf("reconcile: repair %s: %w", m, err)
		v.resolve(ActionAborted)
		for i := range v.Findings {
			v.Findings[i].Detail = truncate("outcome unknown: "+err.Error()+"; "+v.Findings[i].Detail, maxDetail)
		}
		return false, err
	}
	kinds := make([]string, len(v.Findings))
	for i, f := range v.Findings {
		kinds[i] = string(f.Kind)
	}
	fields := []zap.Field{zap.String("merchant_id", m), zap.Strings("kinds", kinds), zap.Int64("remain", v.Plan.Remain),
		zap.Strings("fields_deleted", v.Plan.Delete)}
	if !applied { // the lock is no longer ours, or the hash moved since it was read
		v.resolve(ActionAborted)
		r.m.repairs.WithLabelValues("aborted").Inc()
		r.log.Warn("reconcile repair aborted: the hash or the lock moved", fields...)
		return false, nil
	}
	v.resolve(ActionRepaired)
	result := "repaired"
	if v.Plan.Kind == planHydrate {
		result = "hydrated"
	}
	r.m.repairs.WithLabelValues(result).Inc()
	r.log.Info("reconcile "+result, fields...)
	return true, nil
}

// releaseAll releases the locks, also after ctx ended: a lock left behind
// would stall a worker for its whole TTL.
func (r *Reconciler) releaseAll(ctx context.Context, locks map[string]*lock.Lock) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for m, h := range locks {
		if err := h.Release(ctx); err != nil {
			r.log.Warn("reconcile: release merchant lock", zap.String("merchant_id", m), zap.Error(err))
		}
	}
}

func truncate(s string, n int) string { return s[:min(len(s), n)] }
