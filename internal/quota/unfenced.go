//go:build unfenced

package quota

import (
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// tokenCheck is the fencing of every fenced script, verbatim.
const tokenCheck = "if redis.call('GET', KEYS[2]) ~= ARGV[1] then\n  return {'lock'}\nend\n"

// unfenced names the scripts that lose their token check, comma-separated;
// the fault suite picks them with -ldflags -X (one mutant per script).
var unfenced = "deduct,settle,drop,hydrate,rewrite"

// Script compiles src without its token check when name is chosen: a mutant
// for the fault suite (go test ./internal/faults -run Unfenced), never a
// program's build.
func Script(name, src string) *redis.Script {
	if !slices.Contains(strings.Split(unfenced, ","), name) {
		return redis.NewScript(src)
	}
	return redis.NewScript(strings.Replace(src, tokenCheck, "-- token check removed (unfenced build)\n", 1))
}
