package worker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/plan"
)

// periodsInterval is how often a worker looks for due expiries and plan
// periods. An expiry is exact whatever it is (MySQL's guard refuses debits
// once one is due); the loop records the expiries of idle merchants and
// publishes their quota.expired within about this long.
const periodsInterval = time.Second

// expiryBatch is how many merchants one pass of the expirer takes at once.
const expiryBatch = 50

// periods records due expiries and issues due plan grants in the worker,
// which holds the write path and the merchant locks they need. Every replica
// runs it: the merchant locks and the grants' ids make concurrent runs
// harmless, and the queries that find nothing due are cheap (indexed).
type periods struct {
	d     *deduct.Deductor
	plans *plan.Scheduler
	log   *zap.Logger
}

func newPeriods(d *deduct.Deductor, plans *plan.Store, log *zap.Logger) *periods {
	issue := func(ctx context.Context, g event.GrantCommand) error {
		res, err := d.GrantBatch(ctx, []event.GrantCommand{g})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	return &periods{d: d, plans: plan.NewScheduler(plans, issue), log: log}
}

// Run works every periodsInterval until ctx ends; failures are logged and
// tried again at the next tick.
func (p *periods) Run(ctx context.Context) error {
	t := time.NewTicker(periodsInterval)
	defer t.Stop()
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *periods) once(ctx context.Context) {
	for {
		n, err := p.d.ExpireDue(ctx, expiryBatch)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("grant expiries not recorded; trying again", zap.Error(err))
			}
			break
		}
		if n < expiryBatch {
			break
		}
	}
	if _, err := p.plans.RunOnce(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("plan grants not all issued (a conflicting period keeps the grant it has; any other failure is tried again)", zap.Error(err))
	}
}
