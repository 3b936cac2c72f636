package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/tracing"
)

// Apply records a batch of events of any merchants and returns one Result per
// event, in order (the protocol is the package doc's). An error is transient
// and concerns the whole batch: none of it may be assumed done; apply it again.
func (d *Deductor) Apply(ctx context.Context, events []event.PaymentSucceeded) ([]Result, error) {
	start := time.Now()
	results := make([]Result, len(events))
	s := screen(events, results)
	tags, counts := d.route(events)
	if len(s.open) > 0 {
		if err := d.applyOpen(ctx, &pass{events: events, tags: tags, counts: counts}, s.open, results); err != nil {
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

// applyOpen runs the open events under their shards' locks; those a shard
// could not decide (sharded merchants: not enough in the shard, a missing
// shard, another layout in MySQL) then run in a wide pass under all their
// merchants' shard locks.
func (d *Deductor) applyOpen(ctx context.Context, p *pass, open []int, results []Result) error {
	err := d.locked(ctx, tagsOf(p.tags, open), func(ctx context.Context, held map[string]heldLock) error {
		if err := d.step(stepLocked); err != nil {
			return err
		}
		p.held = held
		return d.redoLoop(ctx, p, open, results)
	})
	if err == nil && len(p.refunded) > 0 {
		err = d.dropAll(ctx, p.refunded)
	}
	if err != nil || len(p.wide) == 0 {
		return err
	}
	return d.applyWide(ctx, p.events, p.tags, p.wide, results)
}

// dropAll drops every shard of the merchants under all their shard locks.
func (d *Deductor) dropAll(ctx context.Context, merchants []string) error {
	merchants = slices.Compact(slices.Sorted(slices.Values(merchants)))
	tags, err := d.tagsOf(ctx, merchants)
	if err != nil {
		return err
	}
	return d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		return d.drop(ctx, held, merchants...)
	})
}

// pass is one locked run of the protocol over events of a batch.
type pass struct {
	events []event.PaymentSucceeded
	tags   []string // tags[i] is the shard (hash tag) of events[i]
	counts []int    // counts[i] is the shard count tags[i] was routed by; nil in a wide pass
	held   map[string]heldLock
	// layouts are the wide pass's, read from MySQL under all the shard locks
	// of its merchants; nil in a routed pass.
	layouts map[string]shard.Layout
	wide    []int // a routed pass's events left to the wide pass
	// refunded are the merchants refunds gave quota back to in this pass:
	// every shard of theirs is dropped after it.
	refunded []string
}

// route is the shard tag of each event by the shard counts as last read, and
// those counts: a shard of another layout refuses the deduction (deduct.lua).
func (d *Deductor) route(events []event.PaymentSucceeded) (tags []string, counts []int) {
	tags, counts = make([]string, len(events)), make([]int, len(events))
	for i, ev := range events {
		n := d.shards.Count(ev.MerchantID)
		tags[i], counts[i] = shard.Tag(ev.MerchantID, shard.Of(ev.EventID, n), n), n
	}
	return tags, counts
}

func tagsOf(tags []string, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = tags[i]
	}
	return out
}

// redoLoop runs attempts until one settles the batch: a stale cache, a
// concurrent duplicate or a refused value sends it back, at most MaxRedo times.
func (d *Deductor) redoLoop(ctx context.Context, p *pass, open []int, results []Result) error {
	events := p.events
	open = slices.Clone(open)
	for redo := 0; ; redo++ {
		wide, err := d.attempt(ctx, p, open, results)
		if err == nil {
			p.wide = wide
			return nil
		}
		if redo >= d.opts.MaxRedo {
			return fmt.Errorf("deduct: batch not settled after %d redos: %w", redo, err)
		}
		var guard *ledger.GuardError
		var ref *ledger.RefusedError
		var due *ledger.ExpiryDueError
		switch {
		case errors.As(err, &due):
			// MySQL's guard met a due expiry: the decision at the boundary is
			// MySQL's clock's. Drop the caches, then record it (so a crash in
			// between leaves nothing over-reporting); the redo hydrates.
			d.metrics.redos.WithLabelValues("expiry").Inc()
			if err := d.expire(ctx, p.held, due.Merchants); err != nil {
				return err
			}
		case errors.As(err, &guard):
			// Redis decided what MySQL disagrees with: it allowed a debit MySQL
			// refuses, or rejected one MySQL covers. Drop the hash; the redo
			// hydrates it from MySQL and gives honest outcomes.
			cause := "over"
			if guard.Covered {
				cause = "under"
			}
			if guard.Covered && p.layouts == nil && d.shards.Count(guard.MerchantID) > 1 {
				// A shard ran dry while the merchant has quota: the routine
				// way to a rebalance, not a stale cache.
				d.metrics.redos.WithLabelValues("rebalance").Inc()
			} else {
				d.metrics.staleRehydrations.WithLabelValues(cause).Inc()
				d.metrics.redos.WithLabelValues("stale_cache").Inc()
				d.log.Warn("stale quota cache: MySQL disagrees with Redis, rehydrating",
					zap.String("merchant_id", guard.MerchantID), zap.Int64("amount", guard.Amount), zap.String("cache", cause))
			}
			if err := d.drop(ctx, p.held, guard.MerchantID); err != nil {
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
			if err := d.drop(ctx, p.held, m); err != nil {
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
// written only when the whole pass succeeded; it returns the events left to
// the wide pass.
func (d *Deductor) attempt(ctx context.Context, p *pass, open []int, results []Result) ([]int, error) {
	events := p.events
	out := make(map[int]Result, len(open))
	var settle settlement
	var wide []int

	ids := make([]string, len(open))
	for k, i := range open {
		ids[k] = events[i].EventID
	}
	sctx, span := tracing.Start(ctx, "ledger.existing_events")
	tracing.SetInt(span, "billing.events", len(ids))
	existing, err := d.ledger.ExistingEvents(sctx, ids)
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	misrouted, err := d.misrouted(ctx, p, open, existing)
	if err != nil {
		return nil, err
	}
	var fresh []int
	var again []string // redelivered: recorded before
	for _, i := range open {
		ev := events[i]
		row, found := existing[ev.EventID]
		switch {
		case misrouted[i]:
			wide = append(wide, i)
		case found:
			out[i] = judge(ev, row)
			settle.ended(p.tags[i], ev)
			again = append(again, ev.EventID)
		default:
			fresh = append(fresh, i)
		}
	}
	// A redelivered payment may have committed with refunds that waited for
	// it, its caches not dropped since (a crash in between): they are now.
	// One query, only for a batch that holds redeliveries.
	var refunded []string
	if len(again) > 0 {
		if refunded, err = d.ledger.RefundedAmong(ctx, again); err != nil {
			return nil, err
		}
	}

	sctx, span = tracing.Start(ctx, "deduct.lua")
	tracing.SetInt(span, "billing.events", len(fresh))
	var codes map[int]byte
	if p.layouts != nil {
		codes, err = d.rebalanceAll(sctx, p, fresh)
	} else {
		codes, err = d.deductAll(sctx, p, fresh)
	}
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	if err := d.step(stepDeducted); err != nil {
		return nil, err
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
		case codeWide:
			wide = append(wide, i)
			continue
		case codePendingDiff:
			out[i] = conflict(fmt.Errorf("deduct: event %s (amount %d) is pending in Redis with another amount", ev.EventID, ev.Amount))
			continue
		default:
			return nil, fmt.Errorf("deduct: event %s: no deduction code", ev.EventID)
		}
		rowOf = append(rowOf, i)
	}
	sctx, span = tracing.Start(ctx, "ledger.commit")
	tracing.SetInt(span, "billing.rows", len(rows))
	err = d.ledger.Commit(sctx, rows)
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	if err := d.step(stepCommitted); err != nil {
		return nil, err
	}

	for k, i := range rowOf {
		r := Result{BalanceAfter: value(rows[k].BalanceAfter)}
		switch rows[k].Kind {
		case ledger.KindDebit:
			r.Outcome = Applied
			settle.debited(p.tags[i], events[i])
		case ledger.KindRejected:
			r.Outcome = Insufficient
			if rows[k].Reason == ledger.ReasonUnknownMerchant {
				r.Outcome = UnknownMerchant
			}
		}
		out[i] = r
	}
	sctx, span = tracing.Start(ctx, "deduct.settle")
	err = d.settleAll(sctx, p.held, settle)
	tracing.End(span, err)
	if errors.Is(err, ErrLockLost) {
		// Committed, but the locks were lost before: another holder may have
		// rebuilt these caches from MySQL meanwhile, without the deductions
		// just committed. Nobody can tell any more, so they are dropped.
		d.dropLost(ctx, settle)
	}
	if err != nil {
		return nil, err
	}
	// Refunds that waited for these payments gave quota back in their
	// transaction: as after a grant, every shard of the merchant is dropped.
	// A wide pass holds them all; a routed pass drops them once its locks are
	// released (dropAll). A crash before leaves them under-reporting until
	// the redelivery finds the refunds (RefundedAmong) and drops them.
	if m := append(refundedMerchants(rows), refunded...); len(m) > 0 {
		if p.layouts == nil {
			p.refunded = append(p.refunded, m...)
		} else if err := d.drop(ctx, p.held, m...); err != nil {
			return nil, err
		}
	}
	if err := d.step(stepConfirmed); err != nil {
		return nil, err
	}
	for i, r := range out {
		results[i] = r
	}
	return wide, nil
}

// misrouted lists the events of a routed pass that are in the ledger already
// and were routed by a shard count MySQL's layout no longer has: a deduction
// they left behind is in their shard of that layout, not in the one routed
// to, so the wide pass (which routes by MySQL) settles them. A fresh event
// needs no such check: its shard refuses a deduction of another layout. One
// query, only for a batch that holds redeliveries.
func (d *Deductor) misrouted(ctx context.Context, p *pass, open []int, existing map[string]ledger.Row) (map[int]bool, error) {
	if p.layouts != nil {
		return nil, nil
	}
	var idx []int
	for _, i := range open {
		if _, found := existing[p.events[i].EventID]; found {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, nil
	}
	layouts, err := d.shards.Layouts(ctx, merchantsOf(p.events, idx))
	if err != nil {
		return nil, err
	}
	out := make(map[int]bool)
	for _, i := range idx {
		if layouts[p.events[i].MerchantID] != (shard.Layout{Shards: p.counts[i]}) {
			out[i] = true
		}
	}
	return out, nil
}

// refundedMerchants lists the merchants of rows that refunds gave quota back
// to in their transaction (ledger.Row.Refunded).
func refundedMerchants(rows []ledger.Row) []string {
	var out []string
	for _, r := range rows {
		if r.Refunded > 0 && !slices.Contains(out, r.MerchantID) {
			out = append(out, r.MerchantID)
		}
	}
	return out
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// dropLost drops, under fresh locks, the caches of a batch that committed
// after its locks were lost (see attempt). It runs past the batch's context,
// which the lost lock ended, within releaseTimeout; if it cannot, the
// reconciler repairs what is left.
func (d *Deductor) dropLost(ctx context.Context, s settlement) {
	tags := make([]string, 0, len(s))
	var merchants []string
	for t := range s {
		tags, merchants = append(tags, t), append(merchants, shard.Merchant(t))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		return d.drop(ctx, held, merchants...)
	})
	d.metrics.staleRehydrations.WithLabelValues("lock_lost").Inc()
	if err != nil {
		d.log.Warn("caches of a batch that committed after losing its locks not dropped; the reconciler repairs them",
			zap.Strings("tags", tags), zap.Error(err))
	}
}

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
