// Package operator assembles billingctl's write path: the services, a Snowflake
// worker ID leased from the operator pool (or IDGEN_WORKER_ID), and the stores
// its commands use; or, for commands that write no ledger row, the same
// without a lease (NewReader), which needs no Redis to start.
package operator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/plan"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/writepath"
)

// The Snowflake worker IDs billingctl leases from when the environment names
// none: the top of the range, kept free of workers. Each command holds one
// for its lifetime and releases it at exit, so up to poolSize commands run
// at once and more wait only for one to finish.
const (
	poolBase = 1008
	poolSize = 16
)

// Operator is the write path for people: quota grants and views, with its own
// leased worker ID (IDGEN_WORKER_ID, or a free one of the operator pool).
type Operator struct {
	WorkerID int // the leased Snowflake worker ID; -1 for a reader
	// DefaultAlerts are the thresholds of merchants without their own (QUOTA_LOW_DEFAULT).
	DefaultAlerts quotaevent.Alerts
	Deductor      *deduct.Deductor
	Ledger        *ledgerdb.Store // for settings that need no merchant lock
	Plans         *plan.Store     // the merchants' recurring plans

	svc       *writepath.Services
	path      *writepath.Path
	stopLease context.CancelFunc
	leaseDone chan error
}

// New opens the services and leases a worker ID.
func New(ctx context.Context, cfg config.Config, log *zap.Logger) (_ *Operator, err error) {
	svc, err := writepath.OpenServices(ctx, cfg, "billingctl", log)
	if err != nil {
		return nil, err
	}
	var p *writepath.Path
	id := cfg.IDGen.WorkerID
	if id >= 0 {
		p, err = writepath.Open(ctx, cfg, svc, writepath.Metrics{}, log, nil)
	} else {
		var lease *idgen.Lease
		if lease, id, err = acquireFromPool(ctx, cfg, svc, log); err == nil {
			p, err = writepath.New(cfg, id, lease, svc, writepath.Metrics{}, log, nil)
			if err != nil {
				_ = lease.Release(context.WithoutCancel(ctx))
			}
		}
	}
	if err != nil {
		svc.Close()
		return nil, err
	}
	op := newOperator(cfg, svc, p)
	op.WorkerID = id
	leaseCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	op.stopLease, op.leaseDone = stop, make(chan error, 1)
	go func() { op.leaseDone <- p.Lease.Run(leaseCtx) }()
	return op, nil
}

// NewReader opens the services without leasing a worker ID: its Deductor
// reads, and fails with writepath.ErrReadOnly to write a ledger row.
func NewReader(ctx context.Context, cfg config.Config, log *zap.Logger) (*Operator, error) {
	svc, err := writepath.OpenServices(ctx, cfg, "billingctl", log)
	if err != nil {
		return nil, err
	}
	p, err := writepath.New(cfg, 0, nil, svc, writepath.Metrics{}, log, nil)
	if err != nil {
		svc.Close()
		return nil, err
	}
	return newOperator(cfg, svc, p), nil
}

func newOperator(cfg config.Config, svc *writepath.Services, p *writepath.Path) *Operator {
	return &Operator{WorkerID: -1, DefaultAlerts: cfg.QuotaEvents.DefaultAlerts,
		Deductor: p.Deductor, Ledger: p.Ledger, Plans: plan.NewStore(svc.SQL), svc: svc, path: p}
}

// Close releases the lease, if any, and the connections.
func (o *Operator) Close() error {
	var err error
	if o.stopLease != nil {
		o.stopLease()
		err = <-o.leaseDone
	}
	o.path.Close()
	return errors.Join(err, o.svc.Close())
}

// acquireFromPool leases the first free worker ID of the operator pool,
// starting at a random one so parallel commands seldom collide. An ID whose
// previous holder's high-water mark is still ahead (it crashed without
// releasing) is passed over like a held one. When every ID is taken it tries
// again, for up to two lease TTLs.
func acquireFromPool(ctx context.Context, cfg config.Config, svc *writepath.Services, log *zap.Logger) (lease *idgen.Lease, id int, err error) {
	holder, ttl := writepath.Holder(cfg), cfg.IDGen.LeaseTTL
	first := rand.IntN(poolSize)
	tryAll := func() error {
		var errs []error
		for i := range poolSize {
			id = poolBase + (first+i)%poolSize
			lease, err = idgen.AcquireLease(ctx, svc.Redis, svc.Keys, id, holder, log, idgen.LeaseOptions{TTL: ttl})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, idgen.ErrWorkerHeld), errors.Is(err, idgen.ErrStartWaitTooLong):
				errs = append(errs, err)
			default:
				return backoff.Permanent(err)
			}
		}
		return fmt.Errorf("operator: every worker ID %d..%d of the pool is in use: %w", poolBase,
			poolBase+poolSize-1, errors.Join(errs...))
	}
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(ttl/3),
		backoff.WithMaxElapsedTime(2*ttl))
	if err := backoff.Retry(tryAll, backoff.WithContext(bo, ctx)); err != nil {
		return nil, 0, err
	}
	log.Info("leased Snowflake worker ID", zap.Int("worker_id", id), zap.String("source", "billingctl pool"))
	return lease, id, nil
}
