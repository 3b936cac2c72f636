package ledger

import "github.com/quotaflow/billing/internal/quotaevent"

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
		switch r.Kind {
		case KindCredit, KindBilled:
			credited[r.MerchantID] += r.Amount
		case KindDebit, KindExpire:
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
