package deduct

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pending is one unconfirmed deduction in Redis.
type Pending struct {
	EventID  string
	Amount   int64
	At       time.Time     // when it was deducted; zero if the value carries no time
	Age      time.Duration // since At; 0 if unknown
	InLedger bool          // the event already has a ledger row (confirm pending)
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
	// Expected is what remain should be: credited - debited - the pending
	// amounts not yet in the ledger.
	Expected int64
	// Drift is Remain - Expected when Cached.
	Drift int64
}

// Show reads a merchant's Redis and MySQL state for an operator. It takes no
// lock, so a batch in flight may show as drift for a moment.
func (d *Deductor) Show(ctx context.Context, merchantID string) (View, error) {
	v := View{MerchantID: merchantID}
	h, err := d.rdb.HGetAll(ctx, d.keys.Quota(merchantID)).Result()
	if err != nil {
		return View{}, fmt.Errorf("deduct: read quota of %s: %w", merchantID, err)
	}
	now := d.now()
	var ids []string
	for field, val := range h {
		switch {
		case field == FieldRemain:
			v.Cached = true
			if v.Remain, err = strconv.ParseInt(val, 10, 64); err != nil {
				return View{}, fmt.Errorf("deduct: remain of %s is %q: %w", merchantID, val, err)
			}
		case field == FieldVer:
			v.Ver, _ = strconv.ParseInt(val, 10, 64)
		case strings.HasPrefix(field, PendingPrefix):
			p := Pending{EventID: strings.TrimPrefix(field, PendingPrefix)}
			if p.Amount, p.At, err = ParsePending(val); err != nil {
				return View{}, err
			}
			if !p.At.IsZero() {
				p.Age = now.Sub(p.At)
			}
			v.Pending = append(v.Pending, p)
			ids = append(ids, p.EventID)
		}
	}
	sort.Slice(v.Pending, func(a, b int) bool { return v.Pending[a].EventID < v.Pending[b].EventID })

	bals, err := d.ledger.Balances(ctx, []string{merchantID})
	if err != nil {
		return View{}, err
	}
	existing, err := d.ledger.ExistingEvents(ctx, ids)
	if err != nil {
		return View{}, err
	}
	b, known := bals[merchantID]
	v.Known, v.Credited, v.Debited = known, b.Credited, b.Debited
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
