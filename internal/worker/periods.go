package worker

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/plan"
)

// periodsMaxSleep bounds the periods loop's sleep until the next due time
// it read: a change that does not wake it (a plan set by another process, a
// grant through another worker's write path) is seen within this long. An
// expiry is exact whatever it is (MySQL's guard refuses debits once one is
// due); the loop records the expiries of idle merchants and publishes their
// quota.expired when they are due.
const periodsMaxSleep = 10 * time.Second

// periodsRetry is the sleep after a failure to read the next due time.
const periodsRetry = time.Second

// expiryBatch is how many merchants one pass of the expirer takes at once.
const expiryBatch = 50

// periods records due expiries and issues due plan grants in the worker,
// which holds the write path and the merchant locks they need. Every replica
// runs it: the merchant locks and the grants' ids make concurrent runs
// harmless, and the queries that find nothing due are cheap (indexed).
type periods struct {
	d     *deduct.Deductor
	plans *plan.Scheduler
	next  []func(context.Context) (time.Duration, bool, error) // how long until each kind is due
	wake  chan struct{}
	log   *zap.Logger
}

// expiries is what periods reads the next expiry from.
type expiries interface {
	UntilNextExpiry(ctx context.Context) (time.Duration, bool, error)
}

func newPeriods(d *deduct.Deductor, exp expiries, plans *plan.Store, log *zap.Logger) *periods {
	issue := func(ctx context.Context, g event.GrantCommand) error {
		res, err := d.GrantBatch(ctx, []event.GrantCommand{g})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	return &periods{d: d, plans: plan.NewScheduler(plans, issue), log: log, wake: make(chan struct{}, 1),
		next: []func(context.Context) (time.Duration, bool, error){exp.UntilNextExpiry, plans.UntilNextPeriod}}
}

// Wake makes the loop read the next due time again now (a grant that may
// expire was applied).
func (p *periods) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run works whatever is due, then sleeps until the next due time (at most
// periodsMaxSleep) or a Wake, until ctx ends; failures are logged and tried
// again then.
func (p *periods) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.wake:
		}
		p.once(ctx)
		t.Reset(p.sleep(ctx))
	}
}

// sleep is how long until the earliest due time, at most periodsMaxSleep;
// what is still due after a pass (it failed, or more than a pass takes) is
// tried again after periodsRetry.
func (p *periods) sleep(ctx context.Context) time.Duration {
	d := periodsMaxSleep
	for _, next := range p.next {
		until, ok, err := next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("next due time not read; looking again soon", zap.Error(err))
			}
			return periodsRetry
		}
		if ok && until <= 0 {
			until = periodsRetry
		}
		if ok {
			d = min(d, until)
		}
	}
	return d
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
