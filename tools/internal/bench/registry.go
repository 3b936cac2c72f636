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

// NewStrategy returns the strategy called name; the merchant locks of
// redis-per-event and pipeline live for lockTTL (default DefaultLockTTL).
func NewStrategy(name string, lockTTL time.Duration) (Strategy, error) {
	if lockTTL <= 0 {
		lockTTL = DefaultLockTTL
	}
	switch name {
	case NameRowLock:
		return &rowLock{}, nil
	case NameRedisPerEvent:
		return &writePath{ttl: lockTTL}, nil
	case NamePipeline:
		return &writePath{batched: true, ttl: lockTTL}, nil
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
		if _, err := NewStrategy(n, 0); err != nil {
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
