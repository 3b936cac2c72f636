package idgen

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireLua string

//go:embed renew.lua
var renewLua string

//go:embed release.lua
var releaseLua string

// scripts are the lease's Lua scripts; Run sends EVALSHA and falls back to EVAL.
type scripts struct{ acquire, renew, release *redis.Script }

func newScripts() scripts {
	return scripts{acquire: redis.NewScript(acquireLua), renew: redis.NewScript(renewLua), release: redis.NewScript(releaseLua)}
}
