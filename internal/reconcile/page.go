package reconcile

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/quota"
)

// pageOutcome is what checking one page of merchants contributes to a run.
// It is filled as far as the page got, also when the page fails.
type pageOutcome struct {
	findings []Finding
	checked  int64    // merchants whose quota hash was read under their lock
	clean    int64    // of those, merchants without any finding
	repaired int64    // merchants whose repair was applied
	busy     []string // merchants whose lock a worker held
	unknown  []string // merchants without a balance row (only named with --merchant)
}

// checkPage checks the quota hashes of merchants against MySQL, each under its
// lock, and repairs them. held names merchants with a critical finding: they
// are checked but not repaired.
func (r *Reconciler) checkPage(ctx context.Context, merchants []string, held map[string]bool) (out pageOutcome, err error) {
	locks, busy, err := r.lockAll(ctx, merchants)
	defer r.releaseAll(ctx, locks)
	out.busy = busy
	if err != nil {
		return out, err
	}
	locked := make([]string, 0, len(locks))
	for _, m := range merchants {
		if _, ok := locks[m]; ok {
			locked = append(locked, m)
		}
	}
	keys := make([]string, len(locked))
	for i, m := range locked {
		keys[i] = r.keys.Quota(m)
	}
	hashes, err := quota.Read(ctx, r.rdb, keys)
	if err != nil {
		return out, err
	}
	var pending []string
	for _, h := range hashes {
		q, _ := quota.Parse(h) // a malformed hash is a finding of classify
		for _, p := range q.Pending {
			pending = append(pending, p.EventID)
		}
	}
	t, err := readTruth(ctx, r.db, locked, pending)
	if err != nil {
		return out, err
	}
	now := r.now()
	for i, m := range locked {
		b, ok := t.Balances[m]
		if !ok {
			out.unknown = append(out.unknown, m)
			continue
		}
		in := merchantInput{ID: m, Credited: b.Credited, Debited: b.Debited, Quota: hashes[i],
			Confirmed: confirmedOf(m, t.Debited), Held: held[m]}
		v := classify(in, now, r.cfg.policy())
		applied, err := r.execute(ctx, m, locks[m], &v)
		if err != nil {
			out.findings = append(out.findings, v.Findings...)
			return out, err
		}
		out.checked++
		if len(v.Findings) == 0 && !held[m] {
			out.clean++
		}
		if applied {
			out.repaired++
		}
		out.findings = append(out.findings, v.Findings...)
	}
	return out, nil
}

// execute runs the verdict's plan, if any, resolves its findings' actions and
// reports whether the plan was applied. A failed script call leaves the
// outcome unknown: the findings say aborted (the next run looks again) and the
// error ends the run.
func (r *Reconciler) execute(ctx context.Context, m string, h Held, v *verdict) (bool, error) {
	if v.Plan.Kind == planNone {
		return false, nil
	}
	if r.beforeApply != nil {
		r.beforeApply(m)
	}
	applied, err := r.applyPlan(ctx, m, h.Token(), v.Plan)
	if err != nil {
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
	if !applied {
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

// confirmedOf is the set of pending event ids with a debit row of merchant m.
func confirmedOf(m string, debited map[string]string) map[string]bool {
	out := make(map[string]bool)
	for e, owner := range debited {
		if owner == m {
			out[e] = true
		}
	}
	return out
}

// lockAll tries each merchant's lock once. It returns the locks taken (also on
// error, for release) and the merchants found busy.
func (r *Reconciler) lockAll(ctx context.Context, merchants []string) (map[string]Held, []string, error) {
	locks := make(map[string]Held, len(merchants))
	var busy []string
	for _, m := range merchants {
		h, err := r.locks.TryLock(ctx, r.keys.Lock(m), r.cfg.LockTTL)
		switch {
		case errors.Is(err, ErrBusy):
			busy = append(busy, m)
		case err != nil:
			return locks, busy, err
		default:
			locks[m] = h
		}
	}
	return locks, busy, nil
}

// releaseAll releases the locks, even when ctx has ended: a lock left behind
// would stall a worker for its whole TTL.
func (r *Reconciler) releaseAll(ctx context.Context, locks map[string]Held) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for m, h := range locks {
		if err := h.Release(ctx); err != nil {
			r.log.Warn("reconcile: release merchant lock", zap.String("merchant_id", m), zap.Error(err))
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
