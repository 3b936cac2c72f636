package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
)

// Issue records one grant command exactly once per GrantID (the worker's
// deduct.GrantBatch): nil when applied or a duplicate.
type Issue func(ctx context.Context, g event.GrantCommand) error

// Scheduler issues the grants of plans whose period has started.
type Scheduler struct {
	store *Store
	issue Issue
}

// NewScheduler is a Scheduler of store's plans through issue.
func NewScheduler(store *Store, issue Issue) *Scheduler {
	return &Scheduler{store: store, issue: issue}
}

// schedulerBatch bounds the plans one read of the due ones takes, and
// schedulerPages the reads of one RunOnce: a pass issues up to 2,000 grants
// (the renewals of a whole fleet anchored at one instant go at once), then
// yields to the expiries.
const (
	schedulerBatch = 100
	schedulerPages = 20
)

// RunOnce issues the grant of the current period (by MySQL's clock) of every
// plan due (up to schedulerPages reads of them), then moves the plan to the
// next period; it returns how many it issued. A grant issued late (the scheduler was down at the period start)
// still starts and expires with its period; periods missed entirely are
// skipped. Concurrent schedulers issue each grant once (its id).
//
// One plan's failure does not hold up the others: a transient one ends the
// pass (the next pass tries again), a permanent one is reported with the
// rest and the plan is tried again next pass, except a conflict: the period
// already has its grant on other terms (the plan changed mid-period), which
// it keeps, and the plan moves on.
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for range schedulerPages {
		n, full, err := s.page(ctx)
		total += n
		if err != nil || !full {
			return total, err
		}
	}
	return total, nil
}

// page issues the grants of one read of due plans; full says that the read
// took schedulerBatch plans and every one moved on, so more may be due.
func (s *Scheduler) page(ctx context.Context) (n int, full bool, err error) {
	plans, now, err := s.store.Due(ctx, schedulerBatch)
	if err != nil {
		return 0, false, err
	}
	var failed []error
	for _, p := range plans {
		start, end, ok := p.Period(now)
		if !ok {
			continue
		}
		switch err := s.issue(ctx, Command(p, start, end)); {
		case err == nil:
			n++
		case !failure.IsPermanent(err):
			return n, false, errors.Join(append(failed, describe(p, start, err))...)
		case failure.ClassOf(err) == failure.ClassConflict:
			failed = append(failed, describe(p, start, err)) // kept; the plan moves on
		default:
			failed = append(failed, describe(p, start, err))
			continue
		}
		if err := s.store.Advance(ctx, p.MerchantID, p.NextStart, end); err != nil {
			return n, false, errors.Join(append(failed, err)...)
		}
	}
	return n, len(plans) == schedulerBatch && n == len(plans), errors.Join(failed...)
}

func describe(p Plan, start time.Time, err error) error {
	return fmt.Errorf("plan: grant of %s for the period from %s: %w", p.MerchantID, start.Format(time.RFC3339), err)
}

// Command is the grant command of p's period [start, end).
func Command(p Plan, start, end time.Time) event.GrantCommand {
	prio := p.Priority
	return event.GrantCommand{GrantID: GrantID(p.MerchantID, start), MerchantID: p.MerchantID, Amount: p.Amount, Source: "plan",
		Priority: &prio, ExpiresAt: &end, RolloverMax: p.RolloverMax, StartsAt: &start}
}
