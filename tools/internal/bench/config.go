package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/workload"
)

// Defaults of Config that billing-sim's flags name too.
const (
	DefaultHot       = 0.2
	DefaultKeyPrefix = "billing-bench:"
)

// Config is one bench run.
type Config struct {
	AdminDSN   string   // server DSN without a database (see AdminDSN)
	Strategies []string // names, in run order; rowlock is the baseline when present
	Events     int
	Merchants  int
	Skew       workload.Skew // default hot:0.2
	MinAmount  int64         // amounts uniform in [MinAmount, MaxAmount] (default 1..10)
	MaxAmount  int64
	Seed       uint64
	Callers    int   // concurrent callers per strategy
	Batch      int   // largest lane batch of a batched strategy
	Quota      int64 // credit granted to every merchant before the run
	// KeyPrefix starts every Redis key of the run; a unique run id and the
	// strategy name are appended, and the keys are deleted at the end.
	KeyPrefix string
	Keep      bool          // keep databases and Redis keys for inspection
	LockTTL   time.Duration // lock PX of redis-per-event
}

// DefaultConfig is the hot workload: 1000 merchants, one of them taking 20%.
func DefaultConfig() Config {
	return Config{
		AdminDSN: DefaultAdminDSN, Strategies: StrategyNames(), Events: 10_000, Merchants: 1000,
		Skew:      workload.Skew{Kind: workload.Hot, Param: DefaultHot},
		MinAmount: workload.DefaultMinAmount, MaxAmount: workload.DefaultMaxAmount, Seed: 1, Callers: 16, Batch: 256,
		Quota:     1_000_000_000, // per merchant: enough for any default workload
		KeyPrefix: DefaultKeyPrefix, LockTTL: DefaultLockTTL,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.AdminDSN != "", "no MySQL DSN")
	check(len(c.Strategies) > 0, "no strategy")
	for _, s := range c.Strategies {
		if _, err := NewStrategy(s, 0); err != nil {
			errs = append(errs, err)
		}
	}
	check(c.Events >= 1, "events %d < 1", c.Events)
	check(c.Callers >= 1 && c.Callers <= 1024, "callers %d outside 1..1024", c.Callers)
	check(c.Batch >= 1, "batch %d < 1", c.Batch)
	check(c.Quota >= 1, "quota %d < 1 (a credit row needs a positive amount)", c.Quota)
	check(!strings.ContainsAny(c.KeyPrefix, "{}"), "key prefix %q must not contain braces", c.KeyPrefix)
	if err := c.workload().Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench: %w", errors.Join(errs...))
	}
	return nil
}

// workload is the stream every strategy gets: valid events only.
func (c Config) workload() workload.Config {
	return workload.Config{Seed: c.Seed, Merchants: c.Merchants, Skew: c.Skew, MinAmount: c.MinAmount, MaxAmount: c.MaxAmount, IDPrefix: "bench-"}
}
