package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

// checkPage checks the quota hashes of merchants against MySQL, each under its
// lock, repairs them and adds what it got to t, also when it fails. A sharded
// merchant is checked as a whole: all its shard locks, the sum of its shards
// (plus pending) against MySQL, and a repair that rewrites every shard.
func (r *Reconciler) checkPage(ctx context.Context, merchants []string, t *tally) (err error) {
	var out Report
	defer func() { t.add(out) }()
	locks := make(map[string]*lock.Lock, len(merchants))
	defer r.releaseAll(ctx, locks)
	tagsOf, locked, busy, err := r.lockPage(ctx, merchants, locks)
	out.BusyMerchants = busy
	if err != nil {
		return err
	}
	var keys []string
	for _, m := range locked {
		for _, tg := range tagsOf[m] {
			keys = append(keys, r.keys.Quota(tg))
		}
	}
	hashes, err := quota.Read(ctx, r.rdb, keys)
	if err != nil {
		return err
	}
	quotas := make([]shardHash, len(hashes))
	var pending []string
	for i, h := range hashes {
		quotas[i] = shardHash{Key: keys[i], Hash: h}
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
	for _, m := range locked {
		tags := tagsOf[m]
		shards := quotas[:len(tags)]
		quotas = quotas[len(tags):]
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
		v := classify(merchantInput{ID: m, balance: b, Shards: shards, Confirmed: confirmed, Held: held}, now, r.cfg)
		var applied bool
		if len(tags) == 1 {
			applied, err = r.execute(ctx, m, locks[m].Token(), &v)
		} else {
			applied, err = r.executeShards(ctx, m, b.Policy.RedisFloor(), tags, locks, shards, &v)
		}
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

// lockPage takes, into locks, the shard locks of each merchant's layout and
// returns the merchants it holds (in page order) with their tags; the others
// are busy: a lock held elsewhere, a resharding still folding, or a layout
// that moved before its locks were taken.
func (r *Reconciler) lockPage(ctx context.Context, merchants []string, locks map[string]*lock.Lock) (
	tagsOf map[string][]string, locked, busy []string, err error) {
	store := shard.NewStore(r.db)
	layouts, err := store.Layouts(ctx, merchants)
	if err != nil {
		return nil, nil, nil, err
	}
	tagsOf = make(map[string][]string, len(merchants))
	for _, m := range merchants {
		l := layouts[m]
		if l.FoldingFrom != 0 {
			// A resharding is folding: the next wide pass of a worker or the
			// reshard command finishes it; checked on the next run.
			busy = append(busy, m)
			continue
		}
		if r.beforeLock != nil {
			r.beforeLock(m)
		}
		tags := l.Tags(m)
		contended, err := r.obtainAll(ctx, tags, locks)
		switch {
		case err != nil:
			return nil, nil, busy, err
		case contended:
			busy = append(busy, m)
			continue
		}
		tagsOf[m] = tags
		locked = append(locked, m)
	}
	// Read the layouts again under the locks, as the write path does (deduct's
	// widePass): a reshard between the two reads moved the quota to shards
	// whose locks these are not. Once these are held, no change of layout
	// reaches Redis until they are released: folding one takes them.
	again, err := store.Layouts(ctx, locked)
	if err != nil {
		return nil, nil, busy, err
	}
	kept := locked[:0]
	for _, m := range locked {
		if again[m] != layouts[m] {
			r.releaseTags(ctx, tagsOf[m], locks)
			delete(tagsOf, m)
			busy = append(busy, m)
			continue
		}
		kept = append(kept, m)
	}
	return tagsOf, kept, busy, nil
}

// obtainAll takes the locks of tags, one try each, into locks (by tag); when
// one is busy it releases those it took and reports busy.
func (r *Reconciler) obtainAll(ctx context.Context, tags []string, locks map[string]*lock.Lock) (busy bool, err error) {
	for k, tg := range tags {
		h, err := r.locks.Obtain(ctx, r.keys.Lock(tg), r.cfg.LockTTL)
		if err == nil {
			locks[tg] = h
			continue
		}
		r.releaseTags(ctx, tags[:k], locks)
		if errors.Is(err, lock.ErrNotObtained) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// executeShards applies a sharded merchant's plan under all its shard locks:
// the shards are rewritten with the plan's remain split evenly and the pending
// deductions it keeps, each in its event's shard (a hydration keeps none, as
// for one hash). The workers' scripts are fenced by the same locks, so nothing
// moved since the read.
func (r *Reconciler) executeShards(ctx context.Context, m, floor string, tags []string, locks map[string]*lock.Lock,
	shards []shardHash, v *verdict) (bool, error) {
	if v.Plan.Kind == planNone {
		return false, nil
	}
	if r.beforeApply != nil {
		r.beforeApply(m)
	}
	var keep []quota.Pending
	var ver int64
	if v.Plan.Kind == planRepair {
		drop := make(map[string]bool, len(v.Plan.Delete))
		for _, f := range v.Plan.Delete {
			drop[f] = true
		}
		for _, sh := range shards {
			q, _ := quota.Parse(sh.Hash) // parsed by classify already
			for _, p := range q.Pending {
				if !drop[quota.PendingField(p.EventID)] {
					keep = append(keep, p)
				}
			}
			n, _ := strconv.ParseInt(q.Ver, 10, 64)
			ver = max(ver, n)
		}
	}
	remains, floors, pendings := quota.Spread(v.Plan.Remain, floor, keep, len(tags))
	calls := make([]*quota.Call, len(tags))
	for s, tg := range tags {
		calls[s] = quota.Rewrite(r.keys.Quota(tg), r.keys.Lock(tg), locks[tg].Token(), remains[s], max(ver+1, r.now().UnixMicro()), floors[s], len(tags), pendings[s])
	}
	quota.Run(ctx, r.rdb, calls...)
	for _, c := range calls {
		if _, err := c.Wrote(); err != nil {
			v.resolve(ActionAborted)
			r.m.repairs.WithLabelValues("aborted").Inc()
			if errors.Is(err, quota.ErrNotHeld) {
				r.log.Warn("reconcile repair aborted: a shard lock moved", zap.String("merchant_id", m))
				return false, nil
			}
			return false, fmt.Errorf("reconcile: repair %s: %w", m, err)
		}
	}
	result := "repaired"
	if v.Plan.Kind == planHydrate {
		result = "hydrated"
	}
	v.resolve(ActionRepaired)
	r.m.repairs.WithLabelValues(result).Inc()
	r.log.Info("reconcile "+result, zap.String("merchant_id", m), zap.Int("shards", len(tags)), zap.Int64("remain", v.Plan.Remain),
		zap.Strings("fields_deleted", v.Plan.Delete))
	return true, nil
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

// releaseTags releases the locks of tags and removes them from locks.
func (r *Reconciler) releaseTags(ctx context.Context, tags []string, locks map[string]*lock.Lock) {
	taken := make(map[string]*lock.Lock, len(tags))
	for _, tg := range tags {
		taken[tg] = locks[tg]
		delete(locks, tg)
	}
	r.releaseAll(ctx, taken)
}

func truncate(s string, n int) string { return s[:min(len(s), n)] }
