package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/tracing"
)

// Apply records a batch of events of any merchants and returns one Result per
// event, in order (the protocol is the package doc's). An error is transient
// and concerns the whole batch: none of it may be assumed done; apply it again.
func (d *Deductor) Apply(ctx context.Context, events []event.PaymentSucceeded) ([]Result, error) {
	start := time.Now()
	results := make([]Result, len(events))
	s := screen(events, results)
	if len(s.open) > 0 {
		if err := d.applyLocked(ctx, events, s.open, results); err != nil {
			d.metrics.failedBatches.Inc()
			if errors.Is(err, ErrLockLost) {
				d.metrics.lockLost.Inc()
			}
			return nil, err
		}
	}
	if len(s.rivals) > 0 {
		if err := d.judgeRivals(ctx, events, s.rivals, results); err != nil {
			d.metrics.failedBatches.Inc()
			return nil, err
		}
	}
	s.finish(results)
	d.metrics.batchEvents.Observe(float64(len(events)))
	d.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	return results, nil
}

// applyLocked runs the batch under its merchants' locks.
func (d *Deductor) applyLocked(ctx context.Context, events []event.PaymentSucceeded, open []int, results []Result) error {
	return d.locked(ctx, merchantsOf(events, open), func(ctx context.Context, held map[string]heldLock) error {
		if err := d.step(stepLocked); err != nil {
			return err
		}
		return d.redoLoop(ctx, held, events, open, results)
	})
}

func merchantsOf(events []event.PaymentSucceeded, idx []int) []string {
	ms := make([]string, len(idx))
	for k, i := range idx {
		ms[k] = events[i].MerchantID
	}
	return ms
}

// redoLoop runs attempts until one settles the batch: a stale cache, a
// concurrent duplicate or a refused value sends it back, at most MaxRedo times.
func (d *Deductor) redoLoop(ctx context.Context, held map[string]heldLock, events []event.PaymentSucceeded, open []int, results []Result) error {
	open = slices.Clone(open)
	for redo := 0; ; redo++ {
		err := d.attempt(ctx, held, events, open, results)
		if err == nil {
			return nil
		}
		if redo >= d.opts.MaxRedo {
			return fmt.Errorf("deduct: batch not settled after %d redos: %w", redo, err)
		}
		var guard *ledger.GuardError
		var ref *ledger.RefusedError
		switch {
		case errors.As(err, &guard):
			// Redis decided what MySQL disagrees with: it allowed a debit MySQL
			// refuses, or rejected one MySQL covers. Drop the hash; the redo
			// hydrates it from MySQL and gives honest outcomes.
			cause := "over"
			if guard.Covered {
				cause = "under"
			}
			d.metrics.staleRehydrations.WithLabelValues(cause).Inc()
			d.metrics.redos.WithLabelValues("stale_cache").Inc()
			d.log.Warn("stale quota cache: MySQL disagrees with Redis, rehydrating",
				zap.String("merchant_id", guard.MerchantID), zap.Int64("amount", guard.Amount), zap.String("cache", cause))
			if err := d.drop(ctx, held, guard.MerchantID); err != nil {
				return err
			}
		case errors.Is(err, ledger.ErrDuplicate):
			// Another holder recorded some of these events (we lost the lock
			// for a while); the next existing-events query sees them.
			d.metrics.redos.WithLabelValues("duplicate").Inc()
		case errors.As(err, &ref) && refusedIn(events, open, ref.EventID) >= 0:
			k := refusedIn(events, open, ref.EventID)
			i, m := open[k], events[open[k]].MerchantID
			results[i] = refused(ref.EventID, ref)
			open = slices.Delete(open, k, k+1)
			d.metrics.redos.WithLabelValues("refused").Inc()
			// Its deduction, if any, is undone by rehydrating the merchant.
			d.metrics.staleRehydrations.WithLabelValues("unmatched").Inc()
			if err := d.drop(ctx, held, m); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// refusedIn is the position in open of the event the database refused, or -1
// (unknown event: the refusal stays a transient error of the whole batch).
func refusedIn(events []event.PaymentSucceeded, open []int, eventID string) int {
	if eventID == "" {
		return -1
	}
	return slices.IndexFunc(open, func(i int) bool { return events[i].EventID == eventID })
}

// attempt is one pass of the protocol over the open events. Results are
// written only when the whole pass succeeded.
func (d *Deductor) attempt(ctx context.Context, held map[string]heldLock, events []event.PaymentSucceeded, open []int, results []Result) error {
	out := make(map[int]Result, len(open))
	var settle settlement

	ids := make([]string, len(open))
	for k, i := range open {
		ids[k] = events[i].EventID
	}
	sctx, span := tracing.Start(ctx, "ledger.existing_events")
	tracing.SetInt(span, "billing.events", len(ids))
	existing, err := d.ledger.ExistingEvents(sctx, ids)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	var fresh []int
	for _, i := range open {
		ev := events[i]
		if row, found := existing[ev.EventID]; found {
			out[i] = judge(ev, row)
			settle.ended(ev)
		} else {
			fresh = append(fresh, i)
		}
	}

	sctx, span = tracing.Start(ctx, "deduct.lua")
	tracing.SetInt(span, "billing.events", len(fresh))
	codes, err := d.deductAll(sctx, held, events, fresh)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	if err := d.step(stepDeducted); err != nil {
		return err
	}

	rows := make([]ledger.Row, 0, len(fresh))
	rowOf := make([]int, 0, len(fresh)) // rows[k] records events[rowOf[k]]
	for _, i := range fresh {
		ev := events[i]
		switch codes[i] {
		case codeDeducted, codeReused:
			rows = append(rows, debitRow(ev))
		case codeNotEnough:
			rows = append(rows, rejectedRow(ev, ledger.ReasonInsufficient))
		case codeUnknown:
			rows = append(rows, rejectedRow(ev, ledger.ReasonUnknownMerchant))
		case codePendingDiff:
			out[i] = conflict(fmt.Errorf("deduct: event %s (amount %d) is pending in Redis with another amount", ev.EventID, ev.Amount))
			continue
		default:
			return fmt.Errorf("deduct: event %s: no deduction code", ev.EventID)
		}
		rowOf = append(rowOf, i)
	}
	sctx, span = tracing.Start(ctx, "ledger.commit")
	tracing.SetInt(span, "billing.rows", len(rows))
	err = d.ledger.Commit(sctx, rows)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	if err := d.step(stepCommitted); err != nil {
		return err
	}

	for k, i := range rowOf {
		r := Result{BalanceAfter: value(rows[k].BalanceAfter)}
		switch rows[k].Kind {
		case ledger.KindDebit:
			r.Outcome = Applied
			settle.debited(events[i])
		case ledger.KindRejected:
			r.Outcome = Insufficient
			if rows[k].Reason == ledger.ReasonUnknownMerchant {
				r.Outcome = UnknownMerchant
			}
		}
		out[i] = r
	}
	sctx, span = tracing.Start(ctx, "deduct.settle")
	err = d.settleAll(sctx, held, settle)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	if err := d.step(stepConfirmed); err != nil {
		return err
	}
	for i, r := range out {
		results[i] = r
	}
	return nil
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
