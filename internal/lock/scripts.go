package lock

import (
	_ "embed"

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
)

// scripts are the token-checked Lua scripts. Each touches only KEYS[1], so it
// runs on a Redis Cluster without CROSSSLOT. Run uses EVALSHA and falls back to
// EVAL when the script cache is empty (a restarted or new node).
type scripts struct {
	obtain  *redis.Script
	release *redis.Script
	refresh *redis.Script
	pttl    *redis.Script
}

func newScripts() scripts {
	return scripts{
		obtain:  redis.NewScript(obtainLua),
		release: redis.NewScript(releaseLua),
		refresh: redis.NewScript(refreshLua),
		pttl:    redis.NewScript(pttlLua),
	}
}
