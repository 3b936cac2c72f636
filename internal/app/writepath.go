package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/plan"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/shard"
)

// writePath is the deduction machinery shared by the worker and the operator
// tool: a leased Snowflake worker ID, the merchant locks, the ledger and the Deductor.
type writePath struct {
	lease    *idgen.Lease
	locks    *lock.Client
	store    *ledger.Store
	Deductor *deduct.Deductor
	// Shards is the merchants' shard counts: routing reads its cache (the
	// worker refreshes it), the Deductor reads MySQL through it.
	Shards *shard.Cache
}

func newWritePath(ctx context.Context, cfg config.Config, svc *services, m *workerMetrics, log *zap.Logger, written func()) (*writePath, error) {
	lease, err := acquireLease(ctx, cfg, svc, m.idgen, log)
	if err != nil {
		return nil, err
	}
	return buildWritePath(cfg, cfg.IDGen.WorkerID, lease, svc, m, log, written)
}

// buildWritePath assembles the write path on a leased worker ID; written (may
// be nil) runs after a commit that wrote balance events.
func buildWritePath(cfg config.Config, workerID int, lease *idgen.Lease, svc *services, m *workerMetrics, log *zap.Logger, written func()) (_ *writePath, err error) {
	wp := &writePath{lease: lease}
	defer func() {
		if err != nil {
			wp.close()
		}
	}()
	gen, err := idgen.New(workerID, idgen.Options{Lease: wp.lease, Metrics: m.idgen})
	if err != nil {
		return nil, err
	}
	if wp.locks, err = lock.New(svc.Redis, lock.Options{Metrics: m.lock, Logger: log}); err != nil {
		return nil, err
	}
	if wp.store, err = ledger.New(svc.DB, idgen.Int64s{Generator: gen}, m.ledger, ledger.Options{Events: ledger.Events{
		PerPayment: cfg.QuotaEvents.PerPayment, DefaultAlerts: cfg.QuotaEvents.DefaultAlerts, Written: written,
	}}); err != nil {
		return nil, err
	}
	sqlDB, err := svc.DB.DB()
	if err != nil {
		return nil, fmt.Errorf("app: mysql pool: %w", err)
	}
	wp.Shards = shard.NewCache(shard.NewStore(sqlDB), shardRefresh, log)
	locks := merchantLocks{client: wp.locks, keys: svc.Keys, ttl: cfg.LockTTL}
	if wp.Deductor, err = deduct.New(svc.Redis, svc.Keys, locks, wp.store, log, m.deduct, deduct.Options{Shards: wp.Shards}); err != nil {
		return nil, err
	}
	return wp, nil
}

// Ledger is the MySQL side, for settings that need no merchant lock.
func (wp *writePath) Ledger() *ledger.Store { return wp.store }

// shardRefresh is how often a worker rereads the shard counts: how long a
// resharding may route events by the previous layout (they are then decided
// under the new one, see deduct.Reshard).
const shardRefresh = time.Second

func (wp *writePath) close() {
	if wp.locks != nil {
		wp.locks.Close()
	}
	if wp.store != nil {
		_ = wp.store.Close() // closing statements of a pool about to close cannot matter
	}
}

// acquireLease leases the configured worker ID. A start that finds the ID held
// by another live holder (a pod restarted after a crash finds its own old
// lease) retries for up to two lease TTLs and then fails, naming the holder,
// rather than taking it.
func acquireLease(ctx context.Context, cfg config.Config, svc *services, m *idgen.Metrics, log *zap.Logger) (lease *idgen.Lease, err error) {
	holder := holderOf(cfg)
	ttl := cfg.IDGen.LeaseTTL
	bo := backoff.WithMaxRetries(backoff.NewConstantBackOff(ttl/3), 6) // two TTLs
	err = backoff.RetryNotify(func() error {
		lease, err = idgen.AcquireLease(ctx, svc.Redis, svc.Keys, cfg.IDGen.WorkerID, holder, log, idgen.LeaseOptions{TTL: ttl, Metrics: m})
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

// holderOf names this process in a lease: the pod, else host and pid.
func holderOf(cfg config.Config) idgen.Holder {
	holder := idgen.Holder{Pod: cfg.IDGen.PodName, IP: cfg.IDGen.PodIP, Since: time.Now().UTC()}
	if holder.Pod == "" {
		host, _ := os.Hostname()
		holder.Pod = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
	}
	return holder
}

// The Snowflake worker IDs billingctl leases from when the environment names
// none: the top of the range, kept free of workers. Each command holds one
// for its lifetime and releases it at exit, so up to OperatorWorkerIDCount
// commands run at once and more wait only for one to finish.
const (
	OperatorWorkerIDBase  = 1008
	OperatorWorkerIDCount = 16
)

// acquireFromPool leases the first free worker ID of the operator pool,
// starting at a random one so parallel commands seldom collide. An ID whose
// previous holder's high-water mark is still ahead (it crashed without
// releasing) is passed over like a held one. When every ID is taken it tries
// again, for up to two lease TTLs.
func acquireFromPool(ctx context.Context, cfg config.Config, svc *services, m *idgen.Metrics, log *zap.Logger) (lease *idgen.Lease, id int, err error) {
	holder, ttl := holderOf(cfg), cfg.IDGen.LeaseTTL
	first := rand.IntN(OperatorWorkerIDCount)
	tryAll := func() error {
		var errs []error
		for i := range OperatorWorkerIDCount {
			id = OperatorWorkerIDBase + (first+i)%OperatorWorkerIDCount
			lease, err = idgen.AcquireLease(ctx, svc.Redis, svc.Keys, id, holder, log, idgen.LeaseOptions{TTL: ttl, Metrics: m})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, idgen.ErrWorkerHeld), errors.Is(err, idgen.ErrStartWaitTooLong):
				errs = append(errs, err)
			default:
				return backoff.Permanent(err)
			}
		}
		return fmt.Errorf("app: every operator worker ID %d..%d is in use: %w", OperatorWorkerIDBase,
			OperatorWorkerIDBase+OperatorWorkerIDCount-1, errors.Join(errs...))
	}
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(ttl/3),
		backoff.WithMaxElapsedTime(2*ttl))
	if err := backoff.Retry(tryAll, backoff.WithContext(bo, ctx)); err != nil {
		return nil, 0, err
	}
	log.Info("leased Snowflake worker ID", zap.Int("worker_id", id), zap.String("source", "billingctl pool"))
	return lease, id, nil
}

// Operator is the write path for people: quota grants and views, with its own
// leased worker ID (IDGEN_WORKER_ID, or a free one of the operator pool).
type Operator struct {
	WorkerID int // the leased Snowflake worker ID
	// DefaultAlerts are the thresholds of merchants without their own (QUOTA_LOW_DEFAULT).
	DefaultAlerts quotaevent.Alerts
	svc           *services
	*writePath
	stopLease context.CancelFunc
	leaseDone chan error
}

// NewOperator opens the services and leases a worker ID.
func NewOperator(ctx context.Context, cfg config.Config, log *zap.Logger) (_ *Operator, err error) {
	svc, err := openServices(ctx, cfg, "billingctl", log)
	if err != nil {
		return nil, err
	}
	m, _ := registerAll(nil, cfg.Kafka) // with no registry it cannot fail
	var wp *writePath
	id := cfg.IDGen.WorkerID
	if id >= 0 {
		wp, err = newWritePath(ctx, cfg, svc, m, log, nil)
	} else {
		var lease *idgen.Lease
		if lease, id, err = acquireFromPool(ctx, cfg, svc, m.idgen, log); err == nil {
			wp, err = buildWritePath(cfg, id, lease, svc, m, log, nil)
			if err != nil {
				_ = lease.Release(context.WithoutCancel(ctx))
			}
		}
	}
	if err != nil {
		svc.Close()
		return nil, err
	}
	leaseCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	op := &Operator{WorkerID: id, DefaultAlerts: cfg.QuotaEvents.DefaultAlerts, svc: svc, writePath: wp, stopLease: stop, leaseDone: make(chan error, 1)}
	go func() { op.leaseDone <- wp.lease.Run(leaseCtx) }()
	return op, nil
}

// Close releases the lease and the connections.
func (o *Operator) Close() error {
	o.stopLease()
	err := <-o.leaseDone
	o.writePath.close()
	return errors.Join(err, o.svc.Close())
}

// Plans is the merchants' recurring plans.
func (o *Operator) Plans() (*plan.Store, error) {
	sqlDB, err := o.svc.DB.DB()
	if err != nil {
		return nil, fmt.Errorf("app: mysql pool: %w", err)
	}
	return plan.NewStore(sqlDB), nil
}
