package lock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/quota"
)

var (
	//go:embed obtain.lua
	obtainLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed release.lua
	releaseLua string
)

// scripts are the token-checked Lua scripts; each takes any number of keys
// and answers 1 or 0 per key.
type scripts struct {
	obtain, refresh, release *redis.Script
}

func newScripts() scripts {
	return scripts{
		obtain:  redis.NewScript(obtainLua),
		refresh: redis.NewScript(refreshLua),
		release: redis.NewScript(releaseLua),
	}
}

// eval runs script on keys with args and returns its answer per key (0 for
// keys after one obtain.lua stopped at). On a single Redis that is one call.
// On a Cluster, where one call may only touch keys of one slot and a batch's
// keys lie in many, it is one call per key, in one pipeline (quota.Run: split
// by node, EVALSHA with EVAL where a node has not cached the script).
func (c *Client) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	calls := []*quota.Call{{Script: script, Keys: keys, Args: args}}
	if _, single := c.rdb.(*redis.Client); !single {
		calls = make([]*quota.Call, len(keys))
		for i, key := range keys {
			calls[i] = &quota.Call{Script: script, Keys: []string{key}, Args: args}
		}
	}
	quota.Run(ctx, c.rdb, calls...)
	out := make([]int64, 0, len(keys))
	for _, call := range calls {
		res, err := call.Cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return append(out, make([]int64, len(keys)-len(out))...), nil
}
