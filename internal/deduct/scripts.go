package deduct

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed deduct.lua
var deductSrc string

//go:embed settle.lua
var settleSrc string

//go:embed drop.lua
var dropSrc string

// scripts are the deduction protocol's fenced Lua scripts (package doc).
type scripts struct{ deduct, settle, drop *redis.Script }

func newScripts() scripts {
	return scripts{deduct: redis.NewScript(deductSrc), settle: redis.NewScript(settleSrc), drop: redis.NewScript(dropSrc)}
}
