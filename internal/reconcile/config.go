package reconcile

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
)

// Defaults of Config (and of the flags).
const (
	DefaultConcurrency    = 4
	DefaultPageSize       = 200
	DefaultGrace          = 2 * time.Minute
	DefaultRepairCeiling  = 1_000_000
	DefaultLockTTL        = 10 * time.Second
	DefaultBusyRetryDelay = time.Second
)

// Config tunes a Reconciler. Zero values take the defaults, except
// RepairCeiling, where 0 means no ceiling.
type Config struct {
	DryRun         bool          // report only: Redis is never written (audit rows and checkpoints are)
	Merchants      []string      // only these merchants; empty: every merchant in merchant_balance
	Concurrency    int           // pages checked at once
	PageSize       int           // merchants per page (keyset pagination on merchant_balance)
	Grace          time.Duration // pending entries younger than this are in-flight work, not drift
	RepairCeiling  int64         // a repair moving remain by more than this is left for a person; 0: none
	LockTTL        time.Duration // TTL of the reconciler's hold on a merchant lock
	SkipHydrate    bool          // report missing quota hashes without hydrating them
	LedgerFull     bool          // ignore the checkpoints: sum every ledger row and rewrite them
	BusyRetryDelay time.Duration // pause before busy merchants are tried once more

	Logger  *zap.Logger // nil: zap.NewNop()
	Metrics *Metrics    // nil: unregistered collectors
}

func (c *Config) setDefaults() (err error) {
	orDefault(&c.Concurrency, DefaultConcurrency)
	orDefault(&c.PageSize, DefaultPageSize)
	orDefault(&c.Grace, DefaultGrace)
	orDefault(&c.LockTTL, DefaultLockTTL)
	orDefault(&c.BusyRetryDelay, DefaultBusyRetryDelay)
	orDefault(&c.Logger, zap.NewNop())
	if c.Metrics == nil {
		c.Metrics, err = NewMetrics(nil)
	}
	return err
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("reconcile: "+format, args...)) }
	if c.Concurrency < 1 || c.Concurrency > 64 {
		bad("concurrency %d is outside 1..64", c.Concurrency)
	}
	if c.PageSize < 1 || c.PageSize > 5000 {
		bad("page size %d is outside 1..5000", c.PageSize)
	}
	if c.Grace < time.Second {
		bad("grace %v is below 1s: in-flight deductions would be taken for orphans", c.Grace)
	}
	if c.RepairCeiling < 0 {
		bad("repair ceiling %d is negative", c.RepairCeiling)
	}
	if c.LockTTL < 100*time.Millisecond || c.LockTTL > time.Minute {
		bad("lock TTL %v is outside 100ms..1m", c.LockTTL)
	}
	if c.BusyRetryDelay < 0 {
		bad("busy retry delay %v is negative", c.BusyRetryDelay)
	}
	for _, m := range c.Merchants {
		if !event.ValidID(m) {
			bad("merchant %q is not a valid merchant id", m)
		}
	}
	return errors.Join(errs...)
}
