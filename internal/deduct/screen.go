package deduct

import (
	"context"
	"fmt"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/shard"
)

// screened is a batch after the checks that need no I/O.
type screened struct {
	open   []int       // first occurrences still to apply, in batch order
	copies map[int]int // later occurrence -> first occurrence, same merchant and amount
	// rivals are later occurrences with another merchant or amount than the
	// first: the ledger decides them once the batch is recorded (judgeRivals).
	rivals []int
}

// screen resolves what needs no I/O: repeated event_ids in the batch (a copy
// of the first, or a rival) and events the contract or the table would refuse.
func screen(events []event.PaymentSucceeded, results []Result) screened {
	s := screened{copies: make(map[int]int)}
	first := make(map[string]int, len(events))
	for i, ev := range events {
		if p, seen := first[ev.EventID]; seen {
			if q := events[p]; q.MerchantID == ev.MerchantID && q.Amount == ev.Amount {
				s.copies[i] = p
			} else {
				s.rivals = append(s.rivals, i)
			}
			continue
		}
		first[ev.EventID] = i
		if err := validate(ev); err != nil {
			results[i] = Result{Outcome: Invalid, Err: failure.Permanent(failure.ClassInvalid, err)}
			continue
		}
		if err := debitRow(ev).Check(); err != nil {
			results[i] = refused(ev.EventID, err)
			continue
		}
		s.open = append(s.open, i)
	}
	return s
}

// finish gives each later occurrence the result of its first: a duplicate,
// or the same permanent error.
func (s screened) finish(results []Result) {
	for i, p := range s.copies {
		r := results[p]
		if r.Err == nil {
			r.Outcome = Duplicate
		}
		results[i] = r
	}
}

// judgeRivals decides the rivals once the batch is recorded, by the ledger
// row: one that matches it is a duplicate (a redelivered original after a
// conflicting copy), any other a conflict, also without a row. Under their
// locks each is settled as ended without a debit (a crash's deduction goes)
// in its shard of MySQL's layout (of both while one folds): the routing's
// count may be behind, and rivals are rare enough for the query.
func (d *Deductor) judgeRivals(ctx context.Context, events []event.PaymentSucceeded, rivals []int, results []Result) error {
	layouts, err := d.shards.Layouts(ctx, merchantsOf(events, rivals))
	if err != nil {
		return err
	}
	var settle settlement
	var tags []string
	for _, i := range rivals {
		ev := events[i]
		l := layouts[ev.MerchantID]
		for _, n := range []int{l.Shards, l.FoldingFrom} {
			if n > 0 {
				t := shard.Tag(ev.MerchantID, shard.Of(ev.EventID, n), n)
				tags = append(tags, t)
				settle.ended(t, ev)
			}
		}
	}
	return d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		ids := make([]string, len(rivals))
		for k, i := range rivals {
			ids[k] = events[i].EventID
		}
		existing, err := d.ledger.ExistingEvents(ctx, ids)
		if err != nil {
			return err
		}
		if err := d.settleAll(ctx, held, settle); err != nil {
			return err
		}
		for _, i := range rivals {
			ev := events[i]
			if row, found := existing[ev.EventID]; found {
				results[i] = judge(ev, row)
			} else {
				results[i] = conflict(fmt.Errorf("deduct: event %s (merchant %s, amount %d) appears in the batch with another merchant or amount, and neither is recorded",
					ev.EventID, ev.MerchantID, ev.Amount))
			}
		}
		return nil
	})
}

// validate repeats the checks of the event contract that keep the Redis keys
// sound (ids become hash tags) and the amounts within exact Lua arithmetic.
func validate(ev event.PaymentSucceeded) error {
	switch {
	case !event.ValidID(ev.EventID):
		return fmt.Errorf("deduct: event_id %q is not 1..64 characters of [A-Za-z0-9_.:-]", ev.EventID)
	case !event.ValidID(ev.MerchantID):
		return fmt.Errorf("deduct: merchant_id %q of event %s is not 1..64 characters of [A-Za-z0-9_.:-]", ev.MerchantID, ev.EventID)
	case ev.Amount < 1 || ev.Amount > event.MaxAmount:
		return fmt.Errorf("deduct: amount %d of event %s is outside 1..10^12", ev.Amount, ev.EventID)
	}
	return nil
}

// judge is the result of an event the ledger has a row for: a duplicate when
// the row matches it, else a conflict.
func judge(ev event.PaymentSucceeded, row ledger.Row) Result {
	if row.MerchantID == ev.MerchantID && row.Amount == ev.Amount && (row.Kind == ledger.KindDebit || row.Kind == ledger.KindRejected) {
		return Result{Outcome: Duplicate, BalanceAfter: value(row.BalanceAfter)}
	}
	return conflict(fmt.Errorf("deduct: event %s (merchant %s, amount %d) is already recorded as %s of %d for merchant %s",
		ev.EventID, ev.MerchantID, ev.Amount, row.Kind, row.Amount, row.MerchantID))
}

func conflict(err error) Result {
	return Result{Outcome: Conflict, Err: failure.Permanent(failure.ClassConflict, err)}
}

func refused(eventID string, err error) Result {
	return Result{Outcome: Refused, Err: failure.Permanent(failure.ClassRefused,
		fmt.Errorf("deduct: event %s refused by the ledger: %w", eventID, err))}
}

func debitRow(ev event.PaymentSucceeded) ledger.Row {
	return ledger.Row{
		EventID: ev.EventID, MerchantID: ev.MerchantID, Kind: ledger.KindDebit, Amount: ev.Amount,
		Reason: ledger.ReasonPayment, PaymentID: ev.PaymentID, Source: string(ev.Source), OccurredAt: ev.OccurredAt.UTC(),
	}
}

func rejectedRow(ev event.PaymentSucceeded, reason string) ledger.Row {
	r := debitRow(ev)
	r.Kind, r.Reason = ledger.KindRejected, reason
	return r
}
