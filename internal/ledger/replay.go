package ledger

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// Standing is what a merchant's balance events depend on: its balance row's
// totals and the base of its percentage thresholds (merchant_balance.low_base).
type Standing struct {
	Credited, Debited int64
	// Base is the available balance right after the merchant's last credit,
	// billed row or expiry: what a percentage threshold is of.
	Base int64
}

// Available is Credited - Debited.
func (s Standing) Available() int64 { return s.Credited - s.Debited }

// RowEvents is the one rule of balance events: those that ledger row r of a
// known merchant announces from st (the merchant's standing before r), and
// the standing after r. The ledger transactions write what it says to the
// outbox; Replay applies it to a whole ledger. Per-payment events
// (quota.deducted, quota.rejected) only with perPayment. A merchant whose
// first movement is a grant is new: that grant recovers nothing.
func RowEvents(r Row, st Standing, lv quotaevent.Levels, perPayment bool) ([]quotaevent.Event, Standing) {
	after := st
	var out []quotaevent.Event
	event := func(t quotaevent.Type) {
		out = append(out, quotaevent.NewEvent(t, r.MerchantID, r.EventID, st.Available(), after.Available(), nil, r.CreatedAt))
	}
	crossed := func(credit bool) {
		c := quotaevent.Change{CausedBy: r.EventID, Before: st.Available(), After: after.Available(),
			BaseBefore: st.Base, BaseAfter: after.Base, Credit: credit}
		out = append(out, quotaevent.Crossed(r.MerchantID, c, lv, r.CreatedAt)...)
	}
	switch r.Kind {
	case KindDebit:
		after.Debited += r.Amount
		if perPayment {
			event(quotaevent.Deducted)
		}
		crossed(false)
	case KindRejected:
		if perPayment {
			event(quotaevent.Rejected)
		}
	case KindExpire:
		after.Debited += r.Amount
		after.Base = after.Available()
		event(quotaevent.Expired)
		crossed(false)
	case KindRefund:
		// A refund is no new period: the base of percentages stays.
		after.Credited += r.Amount
		event(quotaevent.Refunded)
		crossed(true)
	case KindCredit, KindBilled:
		fresh := st.Credited == 0 && st.Debited == 0
		after.Credited += r.Amount
		after.Base = after.Available()
		if r.Kind == KindBilled {
			event(quotaevent.OverageBilled)
		} else {
			event(quotaevent.Granted)
		}
		if !fresh {
			crossed(true)
		}
	}
	return out, after
}

// Replayed is what a merchant's ledger implies, replayed from nothing.
type Replayed struct {
	Standing
	Seq int64 // rows with a seq: the balance row's seq
	// After is the balance after each of the merchant's rows with a seq, in
	// seq order: what their balance_after must say.
	After []int64
	// Events are the balance events the rows imply (per-payment ones aside).
	Events []quotaevent.Event
	// Faults are what the rows say that no ledger may: a seq out of place, a
	// debit the policy did not cover, a rejection it did, a wrong overage,
	// billed overage repaid by a grant.
	Faults []string
}

// Replay is the reference model of the ledger: it replays every merchant's
// rows in seq order (rows without a seq, an unknown merchant's rejections,
// move nothing) from a zero balance, with the thresholds and overdraft policy
// of its balance row in settings (def: the thresholds of a merchant without
// its own), and returns what they imply per merchant. rows may come in any
// order. Whatever the caches, crashes and redeliveries did, the recorded
// balance rows, balance_after values and published events must be what
// Replay says.
func Replay(rows []Row, settings map[string]Balance, def quotaevent.Alerts) map[string]*Replayed {
	ordered := slices.Clone(rows)
	slices.SortStableFunc(ordered, func(a, b Row) int {
		if c := cmp.Compare(a.MerchantID, b.MerchantID); c != 0 {
			return c
		}
		return cmp.Compare(value(a.Seq), value(b.Seq)) // no seq (0) first
	})
	out := map[string]*Replayed{}
	for _, r := range ordered {
		m := out[r.MerchantID]
		if m == nil {
			m = &Replayed{}
			out[r.MerchantID] = m
		}
		if r.Seq == nil {
			if r.Kind != KindRejected || r.Reason != ReasonUnknownMerchant {
				m.fault("row %s (%s) has no seq", r.EventID, r.Kind)
			}
			continue
		}
		m.Seq++
		if *r.Seq != m.Seq {
			m.fault("row %s has seq %d where %d is next", r.EventID, *r.Seq, m.Seq)
		}
		p := settings[r.MerchantID].Policy()
		before := m.Available()
		switch {
		case r.Kind == KindDebit && !p.Covers(before, r.Amount):
			m.fault("debit %s of %d at balance %d: policy %s does not cover it", r.EventID, r.Amount, before, p)
		case r.Kind == KindDebit && r.Overage != p.Overage(before, r.Amount):
			m.fault("debit %s records overage %d, want %d", r.EventID, r.Overage, p.Overage(before, r.Amount))
		case r.Kind == KindRejected && r.Reason == ReasonInsufficient && p.Covers(before, r.Amount):
			m.fault("payment %s of %d rejected at balance %d: policy %s covers it", r.EventID, r.Amount, before, p)
		case r.Kind == KindRejected && r.Reason == ReasonUnknownMerchant:
			m.fault("payment %s rejected as unknown_merchant after the merchant existed", r.EventID)
		case r.Kind == KindCredit && before < 0 && p.Kind == PolicyOverage:
			m.fault("grant %s credited at balance %d under overage: billed units repaid (a billed row must come first)", r.EventID, before)
		case r.Kind == KindBilled && (p.Kind != PolicyOverage || before+r.Amount != 0):
			m.fault("billed row %s of %d at balance %d under policy %s", r.EventID, r.Amount, before, p)
		}
		evs, after := RowEvents(r, m.Standing, settings[r.MerchantID].Levels(def), false)
		m.Standing = after
		m.After = append(m.After, after.Available())
		m.Events = append(m.Events, evs...)
	}
	return out
}

func (m *Replayed) fault(format string, args ...any) {
	m.Faults = append(m.Faults, fmt.Sprintf(format, args...))
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
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

// BatchEvents lists the balance events of a transaction's rows (Seq and
// BalanceAfter set), each merchant's in row order (RowEvents), with def the
// thresholds of a merchant without its own. bals are the balances after the
// rows, but for low_base, which the transaction sets after this.
func BatchEvents(rows []Row, bals []Balance, def quotaevent.Alerts, perPayment bool) []quotaevent.Event {
	before := make(map[string]Standing, len(bals))
	levels := make(map[string]quotaevent.Levels, len(bals))
	var credited, debited = make(map[string]int64), make(map[string]int64)
	for _, r := range rows {
		switch sign, _ := r.Kind.Movement(); sign {
		case 1:
			credited[r.MerchantID] += r.Amount
		case -1:
			debited[r.MerchantID] += r.Amount
		}
	}
	for _, b := range bals {
		before[b.MerchantID] = Standing{Credited: b.Credited - credited[b.MerchantID], Debited: b.Debited - debited[b.MerchantID], Base: b.LowBase}
		levels[b.MerchantID] = b.Levels(def)
	}
	var out []quotaevent.Event
	for _, r := range rows {
		st, known := before[r.MerchantID]
		if !known {
			continue // an unknown merchant has no balance to announce
		}
		evs, after := RowEvents(r, st, levels[r.MerchantID], perPayment)
		before[r.MerchantID] = after
		out = append(out, evs...)
	}
	return out
}
