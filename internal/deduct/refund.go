package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
)

// RefundBatch records each refund once per RefundID, as GrantBatch records
// grants: under every shard lock of the batch's merchants, one ledger.Refund
// transaction, then the quota hashes of the merchants that got quota back
// are dropped (fenced) for the next deduction to hydrate. A due expiry is
// recorded first (the caches dropped before it), then the batch is redone.
// It is the one refund path of billingctl and of the payment.refunded topic.
//
// Per refund: Applied (Refunded says what came back), Waiting (its payment
// is not recorded: it applies with it), Void (its payment was rejected),
// Duplicate (the drop is redone, as for a grant); Conflict (with the part within the debit applied, if any),
// Invalid or Refused with a permanent Err. A returned error concerns the
// whole batch: permanent (refused) or transient; the same batch again is safe.
func (d *Deductor) RefundBatch(ctx context.Context, refunds []event.RefundCommand) ([]Result, error) {
	results := make([]Result, len(refunds))
	var want []ledger.Refund
	var at []int // results[at[j]] is want[j]'s
	var merchants []string
	for i, r := range refunds {
		lr := ledger.Refund{ID: r.RefundID, EventID: r.EventID, MerchantID: r.MerchantID, Amount: r.Amount, Reason: r.Reason, OccurredAt: r.OccurredAt}
		if err := checkRefund(r, lr); err != nil {
			results[i] = Result{Outcome: Invalid, Err: failure.Permanent(failure.ClassInvalid, err)}
			continue
		}
		want, at, merchants = append(want, lr), append(at, i), append(merchants, r.MerchantID)
	}
	if len(want) == 0 {
		return results, nil
	}
	tags, err := d.tagsOf(ctx, merchants)
	if err != nil {
		return nil, err
	}
	err = d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		for redo := 0; ; redo++ {
			out, err := d.ledger.Refund(ctx, want)
			var due *ledger.ExpiryDueError
			switch {
			case errors.As(err, &due) && redo < d.opts.MaxRedo:
				if err := d.expire(ctx, held, due.Merchants); err != nil {
					return err
				}
				continue
			case errors.Is(err, ledger.ErrRefused):
				return failure.Permanent(failure.ClassRefused, err)
			case err != nil:
				return err
			}
			var back []string
			for j, o := range out {
				results[at[j]] = refundResult(o)
				// A duplicate's drop is redone: it completes an interrupted refund.
				if o.Record.State == ledger.RefundApplied && o.Record.Returned > 0 {
					back = append(back, o.Record.MerchantID)
				}
			}
			back = slices.Compact(slices.Sorted(slices.Values(back)))
			if err := d.drop(ctx, held, back...); err != nil {
				return fmt.Errorf("deduct: %d refund(s) recorded but the quota caches not dropped; refund again: %w", len(want), err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// checkRefund holds a refund to the limits of the write path.
func checkRefund(r event.RefundCommand, lr ledger.Refund) error {
	switch {
	case !event.ValidID(r.RefundID):
		return fmt.Errorf("deduct: refund id %q is not 1..64 characters of [A-Za-z0-9_.:-]", r.RefundID)
	case !event.ValidID(r.EventID):
		return fmt.Errorf("deduct: event id %q is not 1..64 characters of [A-Za-z0-9_.:-]", r.EventID)
	case !event.ValidID(r.MerchantID):
		return fmt.Errorf("deduct: merchant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", r.MerchantID)
	case r.Amount < 1 || r.Amount > maxExact:
		return fmt.Errorf("deduct: refund amount %d is outside 1..2^53-1", r.Amount)
	}
	return ledger.CheckRefund(lr)
}

// refundResult is the Result of one recorded (or refused) refund.
func refundResult(o ledger.RefundOutcome) Result {
	r := Result{Outcome: Applied, Refunded: o.Record.Returned}
	switch {
	case errors.Is(o.Err, ledger.ErrConflict):
		r.Outcome, r.Err = Conflict, failure.Permanent(failure.ClassConflict, o.Err)
	case o.Err != nil:
		r.Outcome, r.Err = Refused, failure.Permanent(failure.ClassRefused, o.Err)
	case o.Duplicate:
		r.Outcome = Duplicate
	case o.Record.State == ledger.RefundPending:
		r.Outcome = Waiting
	case o.Record.State == ledger.RefundVoid || o.Record.State == ledger.RefundCancelled:
		r.Outcome = Void
	}
	return r
}

// Refund is RefundBatch of one refund: its outcome and what came back, or its error.
func (d *Deductor) Refund(ctx context.Context, r event.RefundCommand) (Result, error) {
	res, err := d.RefundBatch(ctx, []event.RefundCommand{r})
	if err != nil {
		return Result{}, err
	}
	return res[0], res[0].Err
}
