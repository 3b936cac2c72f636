package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// Events says which balance events the ledger writes to the outbox
// (quota_outbox) in the transaction that moves a balance.
type Events struct {
	// PerPayment adds quota.deducted and quota.rejected for every payment
	// of a known merchant (a row each: the batch's INSERT doubles).
	PerPayment bool
	// DefaultAlerts are the thresholds of a merchant without its own.
	DefaultAlerts quotaevent.Alerts
	// Written, if set, runs after a transaction that wrote events committed
	// (the relay's Wake).
	Written func()
}

// OwnAlerts are the merchant's own low-balance thresholds; false when it has
// none and the default applies.
func (b Balance) OwnAlerts() (quotaevent.Alerts, bool) {
	if b.LowUnits == nil && b.LowPercent == nil {
		return quotaevent.Alerts{}, false
	}
	var a quotaevent.Alerts
	if b.LowUnits != nil {
		a.Units = *b.LowUnits
	}
	if b.LowPercent != nil {
		a.Percent = *b.LowPercent
	}
	return a, true
}

// Levels are the points of b's balance that events announce, with def the
// thresholds of a merchant without its own.
func (b Balance) Levels(def quotaevent.Alerts) quotaevent.Levels {
	a, own := b.OwnAlerts()
	if !own {
		a = def
	}
	lowest, bounded := b.Policy().Lowest()
	return quotaevent.Levels{Alerts: a, Floor: lowest, Unlimited: !bounded}
}

// txEvents lists the balance events of a transaction's rows (Seq and
// BalanceAfter set), each merchant's in row order (RowEvents). bals are the
// balances after the rows, but for low_base, which the transaction sets
// after this.
func (s *Store) txEvents(rows []Row, bals []Balance) []quotaevent.Event {
	before := make(map[string]Standing, len(bals))
	levels := make(map[string]quotaevent.Levels, len(bals))
	var credited, debited = make(map[string]int64), make(map[string]int64)
	for _, r := range rows {
		switch r.Kind {
		case KindCredit, KindBilled:
			credited[r.MerchantID] += r.Amount
		case KindDebit, KindExpire:
			debited[r.MerchantID] += r.Amount
		}
	}
	for _, b := range bals {
		before[b.MerchantID] = Standing{Credited: b.Credited - credited[b.MerchantID], Debited: b.Debited - debited[b.MerchantID], Base: b.LowBase}
		levels[b.MerchantID] = b.Levels(s.opts.Events.DefaultAlerts)
	}
	var out []quotaevent.Event
	for _, r := range rows {
		st, known := before[r.MerchantID]
		if !known {
			continue // an unknown merchant has no balance to announce
		}
		evs, after := RowEvents(r, st, levels[r.MerchantID], s.opts.Events.PerPayment)
		before[r.MerchantID] = after
		out = append(out, evs...)
	}
	return out
}

const outboxTuple = "(?, ?, ?, ?, ?, ?, ?, ?)"

// writeOutbox inserts events into quota_outbox in tx, in order (seq follows
// it). A second row for one id fails the transaction: it cannot happen
// without a second ledger row for its cause, which UNIQUE(event_id) refuses.
func (s *Store) writeOutbox(ctx context.Context, tx *sql.Tx, events []quotaevent.Event) error {
	for off := 0; off < len(events); off += maxOutboxInsert {
		part := events[off:min(off+maxOutboxInsert, len(events))]
		args := make([]any, 0, 8*len(part))
		for _, e := range part {
			var th any
			if e.Threshold != nil {
				th = *e.Threshold
			}
			args = append(args, e.ID, e.MerchantID, string(e.Type), e.BalanceBefore, e.BalanceAfter, th, e.CausedBy, e.OccurredAt)
		}
		q := "INSERT INTO quota_outbox (id, merchant_id, type, balance_before, balance_after, threshold, caused_by, occurred_at) VALUES " +
			outboxTuple + strings.Repeat(", "+outboxTuple, len(part)-1)
		if _, err := s.exec(ctx, tx, q, args); err != nil {
			return fmt.Errorf("ledger: write %d balance events: %w", len(part), err)
		}
	}
	return nil
}

// maxOutboxInsert bounds one outbox INSERT (placeholders stay under 65,535).
const maxOutboxInsert = 2048

func (s *Store) eventsWritten() {
	if s.opts.Events.Written != nil {
		s.opts.Events.Written()
	}
}
