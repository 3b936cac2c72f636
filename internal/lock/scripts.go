package lock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
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
// keys lie in many, it is one call per key in one pipeline, split by node:
// EVALSHA, then EVAL for the calls refused with NOSCRIPT (a restarted node:
// they did not run).
func (c *Client) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	out := make([]int64, len(keys))
	if _, single := c.rdb.(*redis.Client); single {
		res, err := script.Run(ctx, c.rdb, keys, args...).Int64Slice()
		if err != nil {
			return nil, err
		}
		copy(out, res)
		return out, nil
	}
	cmds := make([]*redis.Cmd, len(keys))
	pipe := c.rdb.Pipeline()
	for i, key := range keys {
		cmds[i] = script.EvalSha(ctx, pipe, []string{key}, args...)
	}
	_, _ = pipe.Exec(ctx) // errors are in each command
	pipe = c.rdb.Pipeline()
	for i, key := range keys {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = script.Eval(ctx, pipe, []string{key}, args...)
		}
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(res) == 1 {
			out[i] = res[0]
		}
	}
	return out, nil
}
