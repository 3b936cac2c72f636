package quota

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
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

// Hydrate is the fenced call that loads remain (credited - debited from
// merchant_balance) into a missing hash at quotaKey, dropping any leftover
// fields, and leaves an existing remain alone. Wrote says which it did.
func Hydrate(quotaKey, lockKey, token string, remain int64, now time.Time) *Call {
	return &Call{Script: Script("hydrate", hydrateSrc), Keys: []string{quotaKey, lockKey}, Args: []any{token, remain, now.UnixMicro()}}
}

// Wrote reads a fenced script's {'ok', 1} (wrote) or {'ok', 0} (as Hydrate's).
func (c *Call) Wrote() (bool, error) {
	_, values, err := c.Reply()
	if err != nil {
		return false, err
	}
	return len(values) > 0 && values[0] == int64(1), nil
}
