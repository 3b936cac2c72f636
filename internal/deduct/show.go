package deduct

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// Pending is one unconfirmed deduction in Redis.
type Pending struct {
	quota.Pending
	Age      time.Duration // since At
	InLedger bool          // the event already has a ledger row (its settle has not run)
}

// MarshalJSON is the JSON of a pending deduction wherever it is printed
// (billingctl quota show, the read API): snake_case, the age in milliseconds.
func (p Pending) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		EventID  string    `json:"event_id"`
		Amount   int64     `json:"amount"`
		At       time.Time `json:"at"`
		AgeMs    int64     `json:"age_ms"`
		InLedger bool      `json:"in_ledger"`
	}{p.EventID, p.Amount, p.At.UTC(), p.Age.Milliseconds(), p.InLedger})
}

// View is what Redis and MySQL say about one merchant.
type View struct {
	MerchantID string

	Cached  bool  // quota:{m} has a remain; if not, Remain and Ver are 0
	Remain  int64 // Redis remain
	Ver     int64
	Pending []Pending // sorted by event id

	Known    bool // the merchant has a merchant_balance row
	Credited int64
	Debited  int64
	Expected int64 // what remain should be: credited - debited - pending not in the ledger
	Policy   ledger.Policy
	// Alerts are the merchant's own low-balance thresholds; nil: the default.
	Alerts *quotaevent.Alerts
	Drift  int64 // Remain - Expected when Cached
}

// Show reads a merchant's Redis and MySQL state for an operator. It takes no
// lock, so a batch in flight may show as drift for a moment.
func (d *Deductor) Show(ctx context.Context, merchantID string) (View, error) {
	v := View{MerchantID: merchantID}
	h, err := quota.Read(ctx, d.rdb, []string{d.keys.Quota(merchantID)})
	if err != nil {
		return View{}, err
	}
	q, err := quota.Parse(h[0])
	if err != nil {
		return View{}, fmt.Errorf("deduct: quota of %s: %w", merchantID, err)
	}
	v.Cached, v.Remain = q.Exists, q.Remain
	v.Ver, _ = strconv.ParseInt(q.Ver, 10, 64)
	ids := make([]string, len(q.Pending))
	for k, p := range q.Pending {
		ids[k] = p.EventID
		v.Pending = append(v.Pending, Pending{Pending: p, Age: d.now().Sub(p.At)})
	}

	bals, err := d.ledger.Balances(ctx, []string{merchantID})
	if err != nil {
		return View{}, err
	}
	existing, err := d.ledger.ExistingEvents(ctx, ids)
	if err != nil {
		return View{}, err
	}
	b, known := bals[merchantID]
	v.Known, v.Credited, v.Debited, v.Policy = known, b.Credited, b.Debited, b.Policy()
	if a, own := b.OwnAlerts(); own {
		v.Alerts = &a
	}
	v.Expected = b.Available()
	for k, p := range v.Pending {
		if _, in := existing[p.EventID]; in {
			v.Pending[k].InLedger = true
			continue
		}
		v.Expected -= p.Amount
	}
	if v.Cached {
		v.Drift = v.Remain - v.Expected
	}
	return v, nil
}
