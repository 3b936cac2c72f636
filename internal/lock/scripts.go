package lock

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed obtain.lua
	obtainLua string
	//go:embed release.lua
	releaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed pttl.lua
	pttlLua string
	//go:embed obtain_many.lua
	obtainManyLua string
	//go:embed release_many.lua
	releaseManyLua string
	//go:embed refresh_many.lua
	refreshManyLua string
)

// scripts are the token-checked Lua scripts. Each touches only KEYS[1], so it
// runs on a Redis Cluster without CROSSSLOT. Run uses EVALSHA and falls back to
// EVAL when the script cache is empty (a restarted or new node). The *Many
// variants do the same for many keys in one call, on a single Redis only.
type scripts struct {
	obtain  *redis.Script
	release *redis.Script
	refresh *redis.Script
	pttl    *redis.Script

	obtainMany  *redis.Script
	releaseMany *redis.Script
	refreshMany *redis.Script
}

func newScripts() scripts {
	return scripts{
		obtain:      redis.NewScript(obtainLua),
		release:     redis.NewScript(releaseLua),
		refresh:     redis.NewScript(refreshLua),
		pttl:        redis.NewScript(pttlLua),
		obtainMany:  redis.NewScript(obtainManyLua),
		releaseMany: redis.NewScript(releaseManyLua),
		refreshMany: redis.NewScript(refreshManyLua),
	}
}

// perKey runs a script that answers one integer per key, for every key: on a
// single Redis as one call of many (KEYS = keys, ARGV = manyArgs: the scripts
// cost more to start than to run, and a batch's locks are many), on a Cluster
// (keys of many slots) as one pipelined call of one per key, with oneArgs[i].
// It returns the replies and errors in the order of keys.
func (c *Client) perKey(ctx context.Context, one, many *redis.Script, keys []string, oneArgs [][]any, manyArgs []any) ([]int64, []error) {
	replies := make([]int64, len(keys))
	errs := make([]error, len(keys))
	if _, single := c.rdb.(*redis.Client); single && len(keys) > 1 {
		res, err := many.Run(ctx, c.rdb, keys, manyArgs...).Int64Slice()
		if err == nil && len(res) != len(keys) {
			err = fmt.Errorf("lock: %d replies for %d keys", len(res), len(keys))
		}
		for i := range keys {
			if err != nil {
				errs[i] = err
			} else {
				replies[i] = res[i]
			}
		}
		return replies, errs
	}
	for i, cmd := range runEach(ctx, c.rdb, one, keys, oneArgs) {
		replies[i], errs[i] = cmd.Int64()
	}
	return replies, errs
}

// runEach runs script once per key in one pipeline, with args[i] for keys[i],
// and returns the commands in the order of keys. EVALSHA is tried first; the
// calls refused with NOSCRIPT (a restarted or new node: they did not run) are
// sent again with EVAL, which also caches the script. A Cluster client splits
// the pipeline by node. Errors are in each command.
func runEach(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args [][]any) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(keys))
	pipe := rdb.Pipeline()
	for i, key := range keys {
		cmds[i] = script.EvalSha(ctx, pipe, []string{key}, args[i]...)
	}
	_, _ = pipe.Exec(ctx) // per-call errors are in each command
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	pipe = rdb.Pipeline()
	for _, i := range again {
		cmds[i] = script.Eval(ctx, pipe, []string{keys[i]}, args[i]...)
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}
