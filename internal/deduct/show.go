package deduct

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/shard"
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

	Cached  bool      // every shard has a remain; if none has, Remain and Ver are 0
	Remain  int64     // Redis remain, summed over the shards
	Ver     int64     // the highest of the shards'
	Pending []Pending // of every shard, sorted by event id

	Layout shard.Layout
	Shards []ShardView // in shard order, then those of the layout being folded

	Known    bool // the merchant has a merchant_balance row
	Credited int64
	Debited  int64
	Expected int64 // what remain should be: credited - debited - pending not in the ledger
	LowBase  int64 // what a percentage threshold is of (ledger.Balance.LowBase)
	Policy   ledger.Policy
	// Alerts are the merchant's own low-balance thresholds; nil: the default.
	Alerts *quotaevent.Alerts
	Drift  int64 // Remain - Expected when Cached
	// Grants are the active grants in burn-down order, then the last few
	// ended ones (shownEnded), newest first.
	Grants []ledger.Grant
	// RedisErr is why Redis could not be read (then nothing is Cached); the
	// MySQL side is shown all the same.
	RedisErr error
}

// shownEnded is how many ended grants Show lists.
const shownEnded = 5

// ShardView is one shard's hash.
type ShardView struct {
	Tag     string // the hash tag: the merchant id, or "m#s"
	Cached  bool
	Remain  int64
	Ver     int64
	Pending int
}

// Show reads a merchant's Redis and MySQL state for an operator. It takes no
// lock, so a batch in flight may show as drift for a moment. A Redis it
// cannot read leaves the Redis side empty (RedisErr), the MySQL side shown.
func (d *Deductor) Show(ctx context.Context, merchantID string) (View, error) {
	v := View{MerchantID: merchantID}
	layouts, err := d.shards.Layouts(ctx, []string{merchantID})
	if err != nil {
		return View{}, err
	}
	v.Layout = layouts[merchantID]
	tags := v.Layout.Tags(merchantID)
	keys := make([]string, len(tags))
	for k, t := range tags {
		keys[k] = d.keys.Quota(t)
	}
	hs, err := quota.Read(ctx, d.rdb, keys)
	if err != nil {
		v.RedisErr, hs = fmt.Errorf("deduct: read quota of %s: %w", merchantID, err), nil
	}
	var ids []string
	v.Cached = err == nil
	for k, h := range hs {
		q, err := quota.Parse(h)
		if err != nil {
			return View{}, fmt.Errorf("deduct: quota of %s: %w", tags[k], err)
		}
		sv := ShardView{Tag: tags[k], Cached: q.Exists, Remain: q.Remain, Pending: len(q.Pending)}
		sv.Ver, _ = strconv.ParseInt(q.Ver, 10, 64)
		v.Shards = append(v.Shards, sv)
		if k < v.Layout.Shards {
			v.Cached = v.Cached && q.Exists
		}
		v.Remain += q.Remain
		v.Ver = max(v.Ver, sv.Ver)
		for _, p := range q.Pending {
			ids = append(ids, p.EventID)
			v.Pending = append(v.Pending, Pending{Pending: p, Age: d.now().Sub(p.At)})
		}
	}
	if !v.Cached {
		v.Remain, v.Ver = 0, 0
	}
	slices.SortFunc(v.Pending, func(a, b Pending) int { return strings.Compare(a.EventID, b.EventID) })

	bals, err := d.ledger.Balances(ctx, []string{merchantID})
	if err != nil {
		return View{}, err
	}
	existing, err := d.ledger.ExistingEvents(ctx, ids)
	if err != nil {
		return View{}, err
	}
	b, known := bals[merchantID]
	v.Known, v.Credited, v.Debited, v.Policy, v.LowBase = known, b.Credited, b.Debited, b.Policy(), b.LowBase
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
	gs, err := d.ledger.Grants(ctx, []string{merchantID}, shownEnded)
	if err != nil {
		return View{}, err
	}
	v.Grants = gs[merchantID]
	return v, nil
}
