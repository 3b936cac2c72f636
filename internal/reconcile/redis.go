package reconcile

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/quotaflow/billing/internal/quota"
)

//go:embed repair.lua
var repairLua string

// applyPlan runs the plan's fenced script and reports whether it wrote: not
// when the lock is no longer ours, or the hash moved since it was read.
func (r *Reconciler) applyPlan(ctx context.Context, m, token string, p plan) (bool, error) {
	key, lock := r.keys.Quota(m), r.keys.Lock(m)
	var c *quota.Call
	switch p.Kind {
	case planRepair:
		args := make([]any, 0, 3+len(p.Delete))
		args = append(args, token, p.ExpectVer, p.Remain)
		for _, f := range p.Delete {
			args = append(args, f)
		}
		c = &quota.Call{Script: r.repair, Keys: []string{key, lock}, Args: args}
	case planHydrate:
		c = quota.Hydrate(key, lock, token, p.Remain, r.now())
	default:
		return false, fmt.Errorf("reconcile: no plan for %s", m)
	}
	quota.Run(ctx, r.rdb, c)
	wrote, err := c.Wrote()
	if errors.Is(err, quota.ErrNotHeld) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reconcile: repair %s: %w", m, err)
	}
	return wrote, nil
}
