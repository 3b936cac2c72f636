// Package quotaevent decides which balance events a change of a merchant's
// balance announces (Crossed: a pure function) and is their wire format
// (Message). The ledger calls Crossed inside the transaction that moves the
// balance, so an event is decided by MySQL's balance before and after.
package quotaevent

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// Type is the type of a balance event.
type Type string

// The types of balance events.
const (
	Low           Type = "quota.low"            // a debit took the balance below a low threshold
	Depleted      Type = "quota.depleted"       // a debit took the balance to the point where the policy rejects
	Recovered     Type = "quota.recovered"      // a credit took the balance back above a threshold or the depletion point
	Granted       Type = "quota.granted"        // a grant credited the merchant
	Expired       Type = "quota.expired"        // a grant expired: its remainder left the balance
	OverageBilled Type = "quota.overage_billed" // a grant took billed overage off the balance: back at zero before its credit
	Deducted      Type = "quota.deducted"       // a payment debited the merchant (per-payment events only)
	Rejected      Type = "quota.rejected"       // a payment was rejected (per-payment events only)
)

// Event is one balance event. ID is derived from what caused it, so the same
// change always gives the same ID: consumers dedupe by it.
type Event struct {
	ID            string
	Type          Type
	MerchantID    string
	BalanceBefore int64
	BalanceAfter  int64
	Threshold     *int64 // the crossed threshold; nil for granted, deducted, rejected
	CausedBy      string // the ledger row's event_id (a payment's, or a grant id)
	OccurredAt    time.Time
}

// NewEvent builds an event with its derived ID: <caused_by>/<type>, plus
// /<threshold> for a crossing. '/' appears in no event or grant id.
func NewEvent(t Type, merchantID, causedBy string, before, after int64, threshold *int64, at time.Time) Event {
	id := causedBy + "/" + string(t)
	if threshold != nil {
		id += "/" + strconv.FormatInt(*threshold, 10)
	}
	return Event{ID: id, Type: t, MerchantID: merchantID, BalanceBefore: before, BalanceAfter: after,
		Threshold: threshold, CausedBy: causedBy, OccurredAt: at}
}

// Levels are the points of one merchant's balance that events announce.
type Levels struct {
	// Alerts are the low-balance thresholds (units and/or a percentage of
	// the balance after the last credit or expiry).
	Alerts Alerts
	// Floor is the lowest balance the overdraft policy allows (0 for
	// reject, -N for floor N): reaching it is depletion. Unlimited (overage)
	// never depletes.
	Floor     int64
	Unlimited bool
}

// Change is one ledger row's move of a balance.
type Change struct {
	CausedBy      string
	Before, After int64 // available (credited - debited) around the change
	// BaseBefore and BaseAfter are what a percentage threshold is of, around
	// the change (the balance after the merchant's last credit or expiry).
	BaseBefore, BaseAfter int64
	Credit                bool // the balance rose (else a debit or an expiry)
}

// Crossed returns the crossings of one change, in the order a reader of the
// balance would see them: going down, the highest threshold first, then the
// depletion; going up, the depletion's recovery first, then the lowest
// threshold's. A debit never recovers and a credit never crosses down. Two
// thresholds that come to the same units are one crossing.
func Crossed(merchantID string, c Change, lv Levels, at time.Time) []Event {
	if c.Before == c.After {
		return nil
	}
	type crossing struct {
		t         Type
		threshold int64
	}
	var out []crossing
	for _, unit := range lv.Alerts.list() {
		tb, ta := unit.at(c.BaseBefore), unit.at(c.BaseAfter)
		wasLow, isLow := tb > 0 && c.Before < tb, ta > 0 && c.After < ta
		var x crossing
		switch {
		case !c.Credit && !wasLow && isLow:
			x = crossing{Low, ta}
		case c.Credit && wasLow && !isLow && ta > 0: // a threshold the new base turns off is not recovered
			x = crossing{Recovered, ta}
		default:
			continue
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	if !lv.Unlimited {
		wasOut, isOut := c.Before <= lv.Floor, c.After <= lv.Floor
		switch {
		case !c.Credit && !wasOut && isOut:
			out = append(out, crossing{Depleted, lv.Floor})
		case c.Credit && wasOut && !isOut:
			out = append(out, crossing{Recovered, lv.Floor})
		}
	}
	slices.SortStableFunc(out, func(a, b crossing) int {
		if c.Credit {
			return cmp.Compare(a.threshold, b.threshold)
		}
		return cmp.Compare(b.threshold, a.threshold)
	})
	events := make([]Event, len(out))
	for i, x := range out {
		events[i] = NewEvent(x.t, merchantID, c.CausedBy, c.Before, c.After, &x.threshold, at)
	}
	return events
}
