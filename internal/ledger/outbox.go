package ledger

import (
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

// levels are the points of b's balance that events announce.
func (s *Store) levels(b Balance) quotaevent.Levels {
	a, own := b.OwnAlerts()
	if !own {
		a = s.opts.Events.DefaultAlerts
	}
	lowest, bounded := b.Policy().Lowest()
	return quotaevent.Levels{Alerts: a, Floor: lowest, Unlimited: !bounded}
}

// batchEvents lists the balance events of a batch's rows, whose BalanceAfter
// is set (setBalanceAfter), in row order per merchant. bals are the balances
// after the batch; debits what it debited per merchant.
func (s *Store) batchEvents(rows []Row, bals []Balance, debits map[string]int64) []quotaevent.Event {
	var out []quotaevent.Event
	byMerchant := make(map[string]Balance, len(bals))
	for _, b := range bals {
		byMerchant[b.MerchantID] = b
	}
	before := make(map[string]int64, len(bals))
	for m, b := range byMerchant {
		before[m] = b.Available() + debits[m]
	}
	for _, r := range rows {
		b, known := byMerchant[r.MerchantID]
		if !known || r.BalanceAfter == nil {
			continue // an unknown merchant has no balance to announce
		}
		prev, after := before[r.MerchantID], *r.BalanceAfter
		before[r.MerchantID] = after
		if s.opts.Events.PerPayment {
			t := quotaevent.Deducted
			if r.Kind == KindRejected {
				t = quotaevent.Rejected
			}
			out = append(out, quotaevent.NewEvent(t, r.MerchantID, r.EventID, prev, after, nil, r.CreatedAt))
		}
		if r.Kind == KindDebit {
			c := quotaevent.Change{CausedBy: r.EventID, Before: prev, After: after, CreditedBefore: b.Credited}
			out = append(out, quotaevent.Crossed(r.MerchantID, c, s.levels(b), r.CreatedAt)...)
		}
	}
	return out
}

// grantEvents lists the events of a grant: quota.granted, then what it
// recovered. b is the balance after the grant; a new merchant recovers nothing.
func (s *Store) grantEvents(r Row, b Balance, created bool) []quotaevent.Event {
	after := b.Available()
	out := []quotaevent.Event{quotaevent.NewEvent(quotaevent.Granted, r.MerchantID, r.EventID, after-r.Amount, after, nil, r.CreatedAt)}
	if created {
		return out
	}
	c := quotaevent.Change{CausedBy: r.EventID, Before: after - r.Amount, After: after, CreditedBefore: b.Credited - r.Amount, Credit: true}
	return append(out, quotaevent.Crossed(r.MerchantID, c, s.levels(b), r.CreatedAt)...)
}

const outboxTuple = "(?, ?, ?, ?, ?, ?, ?, ?)"

// writeOutbox inserts events into quota_outbox in the transaction exec runs
// in, in order (seq follows it). A second row for one id fails the
// transaction: it cannot happen without a second ledger row for its cause,
// which UNIQUE(event_id) refuses.
func writeOutbox(events []quotaevent.Event, exec func(query string, args []any) error) error {
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
		if err := exec(q, args); err != nil {
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

// Replay returns the balance events that rows imply, per merchant (the
// per-payment ones aside), replaying each merchant's rows in the order given
// (by id) from a zero balance, with its levels: what the outbox must have
// published, for checks against what it did.
func Replay(rows []Row, levels func(merchantID string) quotaevent.Levels) map[string][]quotaevent.Event {
	type state struct{ balance, credited int64 }
	st := map[string]*state{}
	out := map[string][]quotaevent.Event{}
	for _, r := range rows {
		s, seen := st[r.MerchantID]
		if !seen {
			s = &state{}
			st[r.MerchantID] = s
		}
		c := quotaevent.Change{CausedBy: r.EventID, Before: s.balance, After: s.balance, CreditedBefore: s.credited}
		var evs []quotaevent.Event
		switch r.Kind {
		case KindCredit:
			c.After, c.Credit = s.balance+r.Amount, true
			evs = append(evs, quotaevent.NewEvent(quotaevent.Granted, r.MerchantID, r.EventID, c.Before, c.After, nil, r.CreatedAt))
			if seen { // a merchant's first grant creates it: nothing to recover
				evs = append(evs, quotaevent.Crossed(r.MerchantID, c, levels(r.MerchantID), r.CreatedAt)...)
			}
			s.credited += r.Amount
		case KindDebit:
			c.After = s.balance - r.Amount
			evs = quotaevent.Crossed(r.MerchantID, c, levels(r.MerchantID), r.CreatedAt)
		case KindExpire:
			c.After = s.balance - r.Amount
			evs = append(evs, quotaevent.NewEvent(quotaevent.Expired, r.MerchantID, r.EventID, c.Before, c.After, nil, r.CreatedAt))
			evs = append(evs, quotaevent.Crossed(r.MerchantID, c, levels(r.MerchantID), r.CreatedAt)...)
		}
		s.balance = c.After
		out[r.MerchantID] = append(out[r.MerchantID], evs...)
	}
	return out
}
