package bench

import (
	"fmt"
	"strings"
	"time"
)

// Strategy names.
const (
	NameRowLock       = "rowlock"
	NameRedisPerEvent = "redis-per-event"
	NamePipeline      = "pipeline"
)

// StrategyNames lists the known strategies, baseline first.
func StrategyNames() []string { return []string{NameRowLock, NameRedisPerEvent, NamePipeline} }

// StrategyOptions tune the strategies that have knobs.
type StrategyOptions struct {
	LockTTL time.Duration // merchant lock TTL of redis-per-event and pipeline (default 30s)
}

// NewStrategy returns the strategy called name.
func NewStrategy(name string, opts StrategyOptions) (Strategy, error) {
	switch name {
	case NameRowLock:
		return NewRowLock(), nil
	case NameRedisPerEvent:
		return NewRedisPerEvent(RedisPerEventOptions{LockTTL: opts.LockTTL}), nil
	case NamePipeline:
		return NewPipeline(opts.LockTTL), nil // wired to internal/deduct in pipeline.go
	}
	return nil, fmt.Errorf("bench: unknown strategy %q (known: %s)", name, strings.Join(StrategyNames(), ", "))
}

// ParseStrategies splits a comma list and checks every name.
func ParseStrategies(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, err := NewStrategy(n, StrategyOptions{}); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("bench: strategy %q listed twice", n)
		}
		seen[n] = true
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no strategy in %q", list)
	}
	return out, nil
}
