package idgen

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed renew.lua
	renewLua string
	//go:embed release.lua
	releaseLua string
)

// scripts are the lease's Lua scripts; Run sends EVALSHA and falls back to EVAL.
type scripts struct {
	acquire, renew, release *redis.Script
}

func newScripts() scripts {
	return scripts{
		acquire: redis.NewScript(acquireLua),
		renew:   redis.NewScript(renewLua),
		release: redis.NewScript(releaseLua),
	}
}
