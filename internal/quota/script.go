package quota

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/shard"
)

// ErrNotHeld: a fenced script found another token in the merchant lock, or
// none, and wrote nothing.
var ErrNotHeld = errors.New("quota: merchant lock not held")

// Client is what Run and Read need of a Redis client.
type Client interface {
	Pipeline() redis.Pipeliner
}

// Call is one script invocation of Run. Its outcome is in Cmd.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
	Cmd    *redis.Cmd
}

// Run sends every call in one pipeline as EVALSHA (a Cluster client splits it
// by node), then those refused with NOSCRIPT (they did not run) as EVAL.
func Run(ctx context.Context, rdb Client, calls ...*Call) {
	if len(calls) == 0 {
		return
	}
	pipe := rdb.Pipeline()
	for _, c := range calls {
		c.Cmd = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
	}
	_, _ = pipe.Exec(ctx) // per-call errors are in each Cmd
	pipe = rdb.Pipeline()
	for _, c := range calls {
		if redis.HasErrorPrefix(c.Cmd.Err(), "NOSCRIPT") {
			c.Cmd = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
		}
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
}

// Reply reads the answer of a fenced script, {status, values...}: ErrNotHeld
// when the status is "lock".
func (c *Call) Reply() (status string, values []any, err error) {
	res, err := c.Cmd.Slice()
	if err != nil {
		return "", nil, fmt.Errorf("quota: script on %s: %w", c.Keys[0], err)
	}
	if len(res) > 0 {
		status, _ = res[0].(string)
	}
	if status == "" {
		return "", nil, fmt.Errorf("quota: script on %s: reply %v has no status", c.Keys[0], res)
	}
	if status == "lock" {
		return "", nil, fmt.Errorf("%w: script on %s", ErrNotHeld, c.Keys[0])
	}
	return status, res[1:], nil
}

//go:embed hydrate.lua
var hydrateSrc string

var hydrateScript = Script("hydrate", hydrateSrc)

// Hydrate is the fenced call that loads remain (credited - debited from
// merchant_balance) and the overdraft floor ("0", N or "inf") into a missing
// hash at quotaKey, dropping any leftover fields, and leaves an existing
// remain alone. Wrote says which it did.
func Hydrate(quotaKey, lockKey, token string, remain int64, floor string, now time.Time) *Call {
	return &Call{Script: hydrateScript, Keys: []string{quotaKey, lockKey}, Args: []any{token, remain, now.UnixMicro(), floor}}
}

// Wrote reads a fenced script's {'ok', 1} (wrote) or {'ok', 0} (as Hydrate's).
func (c *Call) Wrote() (bool, error) {
	_, values, err := c.Reply()
	if err != nil {
		return false, err
	}
	return len(values) > 0 && values[0] == int64(1), nil
}

//go:embed rewrite.lua
var rewriteSrc string

var rewriteScript = Script("rewrite", rewriteSrc)

// Rewrite is the fenced call that replaces the hash at quotaKey with remain,
// ver and the given pending deductions (a shard's part of a rebalance of a
// layout of shards shards, which the hash records: FieldShards).
func Rewrite(quotaKey, lockKey, token string, remain, ver int64, floor string, shards int, pending []Pending) *Call {
	args := make([]any, 0, 5+2*len(pending))
	args = append(args, token, remain, ver, floor, shards)
	for _, p := range pending {
		args = append(args, PendingField(p.EventID), FormatPending(p.Amount, p.At))
	}
	return &Call{Script: rewriteScript, Keys: []string{quotaKey, lockKey}, Args: args}
}

// Spread lays a sharded merchant's quota out over its n shards: remain (the
// available balance less what is in flight) and the overdraft floor ("0", N
// or "inf", as the hydration takes it) split evenly, so that the shards'
// remains sum to remain and their floors to the floor, every shard's remain
// at or above its own floor's bound; each pending deduction in its event's
// shard (shard.Of), where a redelivered event finds it.
func Spread(remain int64, floor string, pending []Pending, n int) ([]int64, []string, [][]Pending) {
	n = max(n, 1)
	perShard := make([][]Pending, n)
	for _, p := range pending {
		s := shard.Of(p.EventID, n)
		perShard[s] = append(perShard[s], p)
	}
	floors := make([]string, n)
	var remains []int64
	if f, err := strconv.ParseInt(floor, 10, 64); err == nil && f >= 0 {
		head, fs := shard.Split(remain+f, n), shard.Split(f, n)
		remains = make([]int64, n)
		for s := range remains {
			remains[s], floors[s] = head[s]-fs[s], strconv.FormatInt(fs[s], 10)
		}
		if remain+f < 0 { // below the floor already: the first shard carries it
			remains[0] += remain + f
		}
		return remains, floors, perShard
	}
	for s := range floors {
		floors[s] = floor // unbounded (overage)
	}
	remains = shard.Split(max(remain, 0), n)
	remains[0] += min(remain, 0)
	return remains, floors, perShard
}
