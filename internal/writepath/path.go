package writepath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/shard"
)

// Path is the deduction machinery on a leased Snowflake worker ID. Its owner
// runs Lease (renewals) for as long as it writes, and closes the Path after.
type Path struct {
	Lease *idgen.Lease
	// IDs issues the ledger's ids on Lease; nil on a read-only path.
	IDs      *idgen.Generator
	Deductor *deduct.Deductor
	// Ledger is the MySQL side, for settings that need no merchant lock.
	Ledger *ledgerdb.Store
	// Shards is the merchants' shard counts: routing reads its cache (the
	// worker refreshes it), the Deductor reads MySQL through it.
	Shards *shard.Cache
	locks  *lock.Client
}

// Metrics are the write path's parts' metrics; a nil one is left unregistered.
type Metrics struct {
	IDGen  *idgen.Metrics
	Lock   *lock.Metrics
	Ledger *ledgerdb.Metrics
	Deduct *deduct.Metrics
}

// Open leases the worker ID cfg names (see Lease) and builds the write path on it.
func Open(ctx context.Context, cfg config.Config, svc *Services, m Metrics, log *zap.Logger, written func()) (*Path, error) {
	lease, err := Lease(ctx, cfg, svc, m.IDGen, log)
	if err != nil {
		return nil, err
	}
	return New(cfg, cfg.IDGen.WorkerID, lease, svc, m, log, written)
}

// ErrReadOnly: a path built without a lease writes no ledger row.
var ErrReadOnly = errors.New("writepath: read-only (no Snowflake worker ID leased)")

type readOnly struct{}

func (readOnly) NextIDs([]int64) error { return ErrReadOnly }

// New builds the write path on workerID, leased by lease; written (may be
// nil) runs after a commit that wrote balance events. Without a lease the
// path only reads: a row it would write fails with ErrReadOnly.
func New(cfg config.Config, workerID int, lease *idgen.Lease, svc *Services, m Metrics, log *zap.Logger, written func()) (_ *Path, err error) {
	p := &Path{Lease: lease}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	var ids ledgerdb.IDSource = readOnly{}
	if lease != nil {
		gen, err := idgen.New(workerID, idgen.Options{Lease: lease, Metrics: m.IDGen})
		if err != nil {
			return nil, err
		}
		ids, p.IDs = idgen.Int64s{Generator: gen}, gen
	}
	if p.locks, err = lock.New(svc.Redis, lock.Options{Metrics: m.Lock, Logger: log}); err != nil {
		return nil, err
	}
	if p.Ledger, err = ledgerdb.New(svc.SQL, ids, m.Ledger, ledgerdb.Options{Tracer: svc.DB.Logger, Events: ledgerdb.Events{
		PerPayment: cfg.QuotaEvents.PerPayment, DefaultAlerts: cfg.QuotaEvents.DefaultAlerts, Written: written,
	}}); err != nil {
		return nil, err
	}
	p.Shards = shard.NewCache(shard.NewStore(svc.SQL), shardRefresh, log)
	locks := deduct.MerchantLocks(p.locks, svc.Keys, cfg.LockTTL)
	if p.Deductor, err = deduct.New(svc.Redis, svc.Keys, locks, p.Ledger, log, m.Deduct, deduct.Options{Shards: p.Shards}); err != nil {
		return nil, err
	}
	return p, nil
}

// shardRefresh is how often a worker rereads the shard counts: how long a
// resharding may route events by the previous layout (they are then decided
// under the new one, see deduct.Reshard).
const shardRefresh = time.Second

// Close closes the locks and the ledger's statements; the lease ends with its Run.
func (p *Path) Close() {
	if p.locks != nil {
		p.locks.Close()
	}
	if p.Ledger != nil {
		_ = p.Ledger.Close() // closing statements of a pool about to close cannot matter
	}
}

// Lease leases the worker ID cfg names. A start that finds the ID held by
// another live holder (a pod restarted after a crash finds its own old lease)
// retries for up to two lease TTLs and then fails, naming the holder, rather
// than taking it.
func Lease(ctx context.Context, cfg config.Config, svc *Services, m *idgen.Metrics, log *zap.Logger) (lease *idgen.Lease, err error) {
	holder := Holder(cfg)
	ttl := cfg.IDGen.LeaseTTL
	bo := backoff.WithMaxRetries(backoff.NewConstantBackOff(ttl/3), 6) // two TTLs
	err = backoff.RetryNotify(func() error {
		lease, err = idgen.AcquireLease(ctx, svc.Redis, svc.Keys, cfg.IDGen.WorkerID, holder, log, idgen.LeaseOptions{TTL: ttl, Metrics: m, Clock: svc.Clock})
		if err != nil && !errors.Is(err, idgen.ErrWorkerHeld) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(bo, ctx), func(err error, _ time.Duration) {
		log.Warn("worker ID held by another holder, waiting for its lease to expire", zap.Error(err))
	})
	if err != nil {
		return nil, err
	}
	log.Info("leased Snowflake worker ID", zap.Int("worker_id", cfg.IDGen.WorkerID), zap.String("source", cfg.IDGen.Source))
	return lease, nil
}

// Holder names this process in a lease: the pod, else host and pid.
func Holder(cfg config.Config) idgen.Holder {
	holder := idgen.Holder{Pod: cfg.IDGen.PodName, IP: cfg.IDGen.PodIP, Since: time.Now().UTC()}
	if holder.Pod == "" {
		host, _ := os.Hostname()
		holder.Pod = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
	}
	return holder
}
