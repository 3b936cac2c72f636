//go:build !unfenced

package quota

import "github.com/redis/go-redis/v9"

// Script compiles the fenced script name (one that writes only while the
// caller's token is in the merchant lock). A build with the unfenced tag
// compiles chosen ones without that check: the fault suite's mutants, which
// it must catch; here the name is only a label.
func Script(name, src string) *redis.Script { return redis.NewScript(src) }
