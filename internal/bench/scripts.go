package bench

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed deduct.lua
	deductLua string
	//go:embed refund.lua
	refundLua string
	//go:embed unlock.lua
	unlockLua string
)

// scripts are the Lua scripts of the redis-per-event strategy (EVALSHA with
// an EVAL fallback, through redis.Script.Run).
type scripts struct {
	deduct, refund, unlock *redis.Script
}

func newScripts() scripts {
	return scripts{
		deduct: redis.NewScript(deductLua),
		refund: redis.NewScript(refundLua),
		unlock: redis.NewScript(unlockLua),
	}
}
