package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/workload"
)

// Defaults of Config.
const (
	DefaultEvents    = 10_000
	DefaultMerchants = 1000
	DefaultHot       = 0.2
	DefaultCallers   = 16
	DefaultBatch     = 256
	DefaultQuota     = 1_000_000_000 // per merchant: enough for any default workload
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
		AdminDSN:   DefaultAdminDSN,
		Strategies: StrategyNames(),
		Events:     DefaultEvents,
		Merchants:  DefaultMerchants,
		Skew:       workload.Skew{Kind: workload.Hot, Param: DefaultHot},
		MinAmount:  workload.DefaultMinAmount,
		MaxAmount:  workload.DefaultMaxAmount,
		Seed:       1,
		Callers:    DefaultCallers,
		Batch:      DefaultBatch,
		Quota:      DefaultQuota,
		KeyPrefix:  DefaultKeyPrefix,
		LockTTL:    DefaultLockTTL,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.AdminDSN == "" {
		errs = append(errs, errors.New("no MySQL DSN"))
	}
	if len(c.Strategies) == 0 {
		errs = append(errs, errors.New("no strategy"))
	}
	for _, s := range c.Strategies {
		if _, err := NewStrategy(s, 0); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Events < 1 {
		errs = append(errs, fmt.Errorf("events %d < 1", c.Events))
	}
	if c.Callers < 1 || c.Callers > 1024 {
		errs = append(errs, fmt.Errorf("callers %d outside 1..1024", c.Callers))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch %d < 1", c.Batch))
	}
	if c.Quota < 1 {
		errs = append(errs, fmt.Errorf("quota %d < 1 (a credit row needs a positive amount)", c.Quota))
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		errs = append(errs, fmt.Errorf("key prefix %q must not contain braces", c.KeyPrefix))
	}
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
	return workload.Config{
		Seed:      c.Seed,
		Merchants: c.Merchants,
		Skew:      c.Skew,
		MinAmount: c.MinAmount,
		MaxAmount: c.MaxAmount,
		IDPrefix:  "bench-",
	}
}
