// Package bench compares write strategies for quota deduction: the same
// workload, run through interchangeable strategies against the same MariaDB
// and Redis, each on a fresh database, with N concurrent callers.
//
// Every strategy runs the project's own code: the ledger's Commit alone (the
// row lock "before" of the original design write-up), or the worker's write
// path (internal/deduct with internal/lock) fed single events (the Redis lock
// + Lua "after") or lane batches (the pipeline). Per-event strategies get
// batches of one event from a shared queue, so callers race for a hot
// merchant as independent requests would. Batched
// strategies get lane batches: events partitioned by merchant over the
// callers (one merchant in one caller, in order), as the consumer's lanes
// would hand them out.
//
// After each run the ledger, the balances and (for Redis strategies) the
// Redis balances are checked against one another and against the workload.
// Timing is wall-clock on a shared machine: compare strategies of one run,
// not runs of different days.
package bench

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
)

// Strategy is one way of applying payment events to the balances.
type Strategy interface {
	// Batched reports whether Apply takes lane batches (events of the
	// caller's own merchants, up to Config.Batch) rather than single events.
	Batched() bool
	// Setup prepares the strategy on env (hydrate caches, build clients)
	// before the clock starts.
	Setup(ctx context.Context, env *Env) error
	// Apply applies batch, in order. Business outcomes (insufficient quota,
	// unknown merchant) are recorded in the ledger, not returned; an error
	// aborts the run. It is called from Config.Callers goroutines at once.
	Apply(ctx context.Context, batch []event.PaymentSucceeded) error
	// RedisBalances reports whether the strategy keeps each merchant's
	// balance in Redis (keyspace.Quota); the check then compares it with MySQL.
	RedisBalances() bool
	// Counters are what the strategy counted worth reporting (retries,
	// outcomes); they appear in the report.
	Counters() map[string]int64
	// Close releases what Setup built.
	Close() error
}

// Env is what a strategy runs against: a database of its own (migrated,
// merchants granted) and its ledger, Redis under a key prefix of its own.
type Env struct {
	GORM  *gorm.DB
	Store *ledgerdb.Store
	Redis redis.UniversalClient
	Keys  keyspace.Keyspace // the strategy's own key prefix
	Log   *zap.Logger
}
