package deduct

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
)

// ErrLockLost: a merchant lock was lost during the batch (a fenced script
// found another token, or the lock's context ended). Transient: nothing of the
// batch may be assumed done; apply it again. A lost lock is never a message's
// fault (Redis failed over, went silent, or the worker stalled), so it is an
// outage: retried without counting attempts, never dead-lettered.
var ErrLockLost = failure.Outage(errors.New("deduct: merchant lock lost"))

// Locker takes a merchant's lock, waiting while another holder has it.
type Locker interface {
	Acquire(ctx context.Context, merchantID string) (HeldLock, error)
}

// BatchLocker is a Locker that takes and releases many merchants' locks in a
// few round trips. The Deductor uses it, when its Locker has it, for the
// locks of a batch; the watch on each lock is the same as with Acquire.
type BatchLocker interface {
	Locker
	// AcquireAll takes the locks of merchantIDs (distinct, sorted), waiting
	// while other holders have some, and returns them in the same order, or an
	// error and holds none of them. It must not deadlock with other callers
	// of AcquireAll or Acquire that take overlapping sets in sorted order.
	AcquireAll(ctx context.Context, merchantIDs []string) ([]HeldLock, error)
	// ReleaseAll releases locks taken by this Locker, as Release does each.
	ReleaseAll(ctx context.Context, locks []HeldLock) error
}

// HeldLock is a held merchant lock. Its value, Token, is the fencing token the
// scripts compare; Key must be in the merchant's hash slot (keyspace.Lock).
type HeldLock interface {
	Key() string
	Token() string
	// Context is cancelled when the lock is lost (or released).
	Context() context.Context
	Release(ctx context.Context) error
}

// Ledger is the MySQL side (implemented by *ledger.Store).
type Ledger interface {
	ExistingEvents(ctx context.Context, eventIDs []string) (map[string]ledger.Row, error)
	Balances(ctx context.Context, merchantIDs []string) (map[string]ledger.Balance, error)
	Commit(ctx context.Context, rows []ledger.Row) error
	Grant(ctx context.Context, merchantID string, amount int64, grantID string) (ledger.Row, bool, error)
}

// Redis is what the Deductor needs of a client (*redis.Client or *redis.ClusterClient).
type Redis interface {
	Pipeline() redis.Pipeliner
}

var _ Ledger = (*ledger.Store)(nil)

// Options tunes a Deductor. The zero value is valid.
type Options struct {
	// MaxRedo bounds how often one batch is redone after a stale cache, a
	// concurrent duplicate or a refused value (default 8).
	MaxRedo int
	// ReleaseTimeout bounds unlocking at the end of a batch, which runs even
	// when the batch's context has ended (default 5s).
	ReleaseTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.MaxRedo <= 0 {
		o.MaxRedo = 8
	}
	if o.ReleaseTimeout <= 0 {
		o.ReleaseTimeout = 5 * time.Second
	}
}

// Deductor applies batches of payment events. It is safe for concurrent use;
// the merchant locks serialize batches that share a merchant.
type Deductor struct {
	rdb     Redis
	keys    keyspace.Keyspace
	locks   Locker
	ledger  Ledger
	log     *zap.Logger
	metrics *Metrics
	opts    Options
	scripts scripts
	now     func() time.Time

	// afterStep, when set (tests only), runs after each step of a batch; an
	// error simulates a crash there: Apply returns at once and abandons its
	// locks without releasing them.
	afterStep func(step string) error
}

// New returns a Deductor. log and m may be nil (no logs; unregistered metrics).
func New(rdb Redis, keys keyspace.Keyspace, locks Locker, led Ledger, log *zap.Logger, m *Metrics, opts Options) (*Deductor, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("deduct: nil Redis client")
	case locks == nil:
		return nil, errors.New("deduct: nil Locker")
	case led == nil:
		return nil, errors.New("deduct: nil Ledger")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	opts.setDefaults()
	return &Deductor{
		rdb: rdb, keys: keys, locks: locks, ledger: led, log: log, metrics: m, opts: opts,
		scripts: newScripts(), now: time.Now,
	}, nil
}

// Steps of a batch, reported to afterStep.
const (
	stepLocked    = "locked"
	stepDeducted  = "deducted"
	stepCommitted = "committed"
	stepConfirmed = "confirmed"
)

// crashError is a simulated crash (see afterStep).
type crashError struct{ err error }

func (e *crashError) Error() string { return "deduct: simulated crash: " + e.err.Error() }
func (e *crashError) Unwrap() error { return e.err }

func (d *Deductor) step(name string) error {
	if d.afterStep == nil {
		return nil
	}
	if err := d.afterStep(name); err != nil {
		return &crashError{err: err}
	}
	return nil
}
