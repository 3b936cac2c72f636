package deduct

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed deduct.lua
	deductSrc string
	//go:embed hydrate.lua
	hydrateSrc string
	//go:embed settle.lua
	settleSrc string
	//go:embed drop.lua
	dropSrc string
)

type scripts struct {
	deduct, hydrate, settle, drop *redis.Script
}

func newScripts() scripts {
	return scripts{
		deduct:  redis.NewScript(deductSrc),
		hydrate: redis.NewScript(hydrateSrc),
		settle:  redis.NewScript(settleSrc),
		drop:    redis.NewScript(dropSrc),
	}
}

// scriptCall is one script invocation of a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// runAll sends every call in one pipeline (EVALSHA; a Cluster client splits it
// by node). Calls refused with NOSCRIPT (a restarted or failed-over server)
// did not run, so they are sent again with EVAL, which also caches the script.
// Each call's outcome is in its cmd.
func runAll(ctx context.Context, rdb Redis, calls []*scriptCall) {
	if len(calls) == 0 {
		return
	}
	pipe := rdb.Pipeline()
	for _, c := range calls {
		c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // per-call errors are in each cmd
	var again []*scriptCall
	for _, c := range calls {
		if redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) == 0 {
		return
	}
	pipe = rdb.Pipeline()
	for _, c := range again {
		c.cmd = c.script.Eval(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
}

// reply is a script's answer: {status, values...}.
type reply struct {
	status string
	values []any
}

func parseReply(cmd *redis.Cmd) (reply, error) {
	res, err := cmd.Slice()
	if err != nil {
		return reply{}, err
	}
	if len(res) == 0 {
		return reply{}, fmt.Errorf("deduct: empty script reply")
	}
	status, ok := res[0].(string)
	if !ok {
		return reply{}, fmt.Errorf("deduct: script reply status %T", res[0])
	}
	return reply{status: status, values: res[1:]}, nil
}
