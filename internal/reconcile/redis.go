package reconcile

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/keyspace"
)

var (
	//go:embed repair.lua
	repairLua string
	//go:embed hydrate.lua
	hydrateLua string
)

// scripts are the reconciler's fenced Lua scripts (EVALSHA, EVAL fallback).
type scripts struct {
	repair  *redis.Script
	hydrate *redis.Script
}

func newScripts() scripts {
	return scripts{repair: redis.NewScript(repairLua), hydrate: redis.NewScript(hydrateLua)}
}

// Results of the scripts.
const (
	scriptApplied = 1
	scriptNotOurs = -1 // the lock is no longer ours
	scriptMoved   = -2 // ver moved, or the hash appeared or vanished
)

// readQuotas reads the quota hashes of merchants in one pipeline. A missing
// key reads as an empty map.
func readQuotas(ctx context.Context, rdb redis.UniversalClient, keys keyspace.Keyspace, merchants []string) (map[string]map[string]string, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(merchants))
	for i, m := range merchants {
		cmds[i] = pipe.HGetAll(ctx, keys.Quota(m))
	}
	if len(merchants) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("reconcile: read quota hashes: %w", err)
		}
	}
	out := make(map[string]map[string]string, len(merchants))
	for i, m := range merchants {
		out[m] = cmds[i].Val()
	}
	return out, nil
}

// applyPlan runs the plan's script. It returns one of the script results.
func (r *Reconciler) applyPlan(ctx context.Context, m, token string, p plan) (int64, error) {
	keys := []string{r.keys.Quota(m), r.keys.Lock(m)}
	var cmd *redis.Cmd
	switch p.Kind {
	case planRepair:
		args := make([]any, 0, 3+len(p.Delete))
		args = append(args, token, p.ExpectVer, p.Remain)
		for _, f := range p.Delete {
			args = append(args, f)
		}
		cmd = r.scripts.repair.Run(ctx, r.rdb, keys, args...)
	case planHydrate:
		cmd = r.scripts.hydrate.Run(ctx, r.rdb, keys, token, p.Remain, r.now().UnixMicro())
	default:
		return 0, fmt.Errorf("reconcile: no plan for %s", m)
	}
	res, err := cmd.Int64()
	if err != nil {
		return 0, fmt.Errorf("reconcile: repair %s: %w", m, err)
	}
	return res, nil
}
