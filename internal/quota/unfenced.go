//go:build unfenced

package quota

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// tokenCheck is the fencing of every fenced script, verbatim.
const tokenCheck = "if redis.call('GET', KEYS[2]) ~= ARGV[1] then\n  return {'lock'}\nend\n"

// Script compiles src without its token check: a mutant for the fault suite
// (go test ./internal/faults -run Unfenced), never a program's build.
func Script(src string) *redis.Script {
	return redis.NewScript(strings.Replace(src, tokenCheck, "-- token check removed (unfenced build)\n", 1))
}
