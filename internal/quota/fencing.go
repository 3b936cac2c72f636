//go:build !unfenced

package quota

import "github.com/redis/go-redis/v9"

// Script compiles a fenced script (one that writes only while the caller's
// token is in the merchant lock). A build with the unfenced tag compiles it
// without that check: the fault suite's mutant, which it must catch.
func Script(src string) *redis.Script { return redis.NewScript(src) }
