// Package quotaevent decides which balance events a change of a merchant's
// balance announces (Crossed: a pure function) and is their wire format
// (Message). The ledger calls Crossed inside the transaction that moves the
// balance, so an event is decided by MySQL's balance before and after.
package quotaevent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	Refunded      Type = "quota.refunded"       // a refunded payment gave quota back (recovered crossings follow as for a grant)
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

// Alerts are a merchant's low-balance thresholds: Units (absolute) and
// Percent (of the balance right after the merchant's last credit or expiry:
// what it holds for the period, see Change); 0 turns either off. A threshold
// that comes to less than 1 unit is off: low always means above depletion.
type Alerts struct {
	Units   int64
	Percent int
}

// MaxPercent is the largest percentage threshold (100 would always be low).
const MaxPercent = 99

// IsZero reports no threshold at all.
func (a Alerts) IsZero() bool { return a.Units == 0 && a.Percent == 0 }

// Thresholds are the thresholds in units for a base (see Alerts), highest
// first, equal ones once.
func (a Alerts) Thresholds(base int64) []int64 {
	var out []int64
	for _, t := range a.list() {
		if v := t.at(base); v > 0 && (len(out) == 0 || out[0] != v) {
			out = append(out, v)
		}
	}
	if len(out) == 2 && out[1] > out[0] {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

func (a Alerts) String() string {
	var parts []string
	if a.Units > 0 {
		parts = append(parts, strconv.FormatInt(a.Units, 10))
	}
	if a.Percent > 0 {
		parts = append(parts, strconv.Itoa(a.Percent)+"%")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// threshold is one configured threshold: units, or a percentage.
type threshold struct {
	units   int64
	percent int
}

func (a Alerts) list() []threshold {
	var out []threshold
	if a.Units > 0 {
		out = append(out, threshold{units: a.Units})
	}
	if a.Percent > 0 {
		out = append(out, threshold{percent: a.Percent})
	}
	return out
}

// at is the threshold in units for a base (rounded down).
func (t threshold) at(base int64) int64 {
	if t.percent == 0 {
		return t.units
	}
	return max(base, 0)/100*int64(t.percent) + max(base, 0)%100*int64(t.percent)/100
}

// ParseAlerts reads thresholds as "1000", "10%" or both, comma-separated
// ("1000,10%"), or "none"; at most one of each kind.
func ParseAlerts(s string) (Alerts, error) {
	var a Alerts
	if s = strings.TrimSpace(s); s == "none" || s == "" {
		return a, nil
	}
	for _, part := range strings.Split(s, ",") {
		if err := a.add(strings.TrimSpace(part)); err != nil {
			return Alerts{}, err
		}
	}
	return a, nil
}

// add reads one threshold, "1000" or "10%", into a.
func (a *Alerts) add(s string) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		switch {
		case err != nil || n < 1 || n > MaxPercent:
			return fmt.Errorf("threshold %q: a percentage must be 1..%d%%", s, MaxPercent)
		case a.Percent != 0:
			return errors.New("at most one percentage threshold")
		}
		a.Percent = n
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || n < 1:
		return fmt.Errorf("threshold %q: units must be a positive integer, or a percentage like 10%%", s)
	case a.Units != 0:
		return errors.New("at most one threshold in units")
	}
	a.Units = n
	return nil
}
