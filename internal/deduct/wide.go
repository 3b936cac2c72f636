package deduct

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

// Shards tells the Deductor merchants' shard counts (package shard).
type Shards interface {
	// Count is the merchant's shard count as last read: it routes events.
	Count(merchantID string) int
	// Layouts reads the layouts from MySQL: they decide what is rebalanced.
	Layouts(ctx context.Context, merchantIDs []string) (map[string]shard.Layout, error)
	// Set changes a merchant's shard count (a layout to fold).
	Set(ctx context.Context, merchantID string, n int) (shard.Layout, error)
	// Folded records that nothing of a layout's previous one is left in Redis.
	Folded(ctx context.Context, merchantID string, l shard.Layout) error
}

// oneShard is the Shards of a Deductor built without any: every merchant has
// one shard, today's layout.
type oneShard struct{}

func (oneShard) Count(string) int { return 1 }
func (oneShard) Layouts(_ context.Context, ms []string) (map[string]shard.Layout, error) {
	out := make(map[string]shard.Layout, len(ms))
	for _, m := range ms {
		out[m] = shard.Layout{Shards: 1}
	}
	return out, nil
}
func (oneShard) Set(context.Context, string, int) (shard.Layout, error) {
	return shard.Layout{}, fmt.Errorf("deduct: no shard store to set shard counts in")
}
func (oneShard) Folded(context.Context, string, shard.Layout) error { return nil }

// applyWide decides events no single shard could, under every shard lock of
// their merchants (taken at once, in sorted order): each merchant's quota is
// recomputed from MySQL minus its deductions in flight, its events decided as
// MySQL will decide them, and what is left split evenly over its shards. The
// layouts are read from MySQL, so a resharding not folded yet is folded here.
func (d *Deductor) applyWide(ctx context.Context, events []event.PaymentSucceeded, tags []string, idx []int, results []Result) error {
	merchants := slices.Compact(slices.Sorted(slices.Values(merchantsOf(events, idx))))
	return d.widePass(ctx, events, tags, merchants, func(ctx context.Context, p *pass) error {
		for _, i := range idx {
			l := p.layouts[events[i].MerchantID]
			tags[i] = shard.Tag(events[i].MerchantID, shard.Of(events[i].EventID, l.Shards), l.Shards)
		}
		return d.redoLoop(ctx, p, idx, results)
	})
}

// errLayoutMoved: a merchant's layout changed between reading it and holding
// its shard locks; the locks held may not be all its shards.
var errLayoutMoved = errors.New("deduct: shard layout changed while locking")

// maxLayoutMoves bounds how often one wide pass follows a changing layout.
const maxLayoutMoves = 5

// widePass runs fn under every shard lock of the merchants' layouts, as read
// from MySQL and read again under the locks: a resharding that was folded
// between the two reads would otherwise have its old shards rebuilt here.
// Once fn succeeded, the layouts are marked folded.
func (d *Deductor) widePass(ctx context.Context, events []event.PaymentSucceeded, tags, merchants []string, fn func(ctx context.Context, p *pass) error) error {
	for moves := 0; ; moves++ {
		layouts, err := d.shards.Layouts(ctx, merchants)
		if err != nil {
			return err
		}
		var lockTags []string
		for _, m := range merchants {
			lockTags = append(lockTags, layouts[m].Tags(m)...)
		}
		p := &pass{events: events, tags: tags, layouts: layouts}
		err = d.locked(ctx, lockTags, func(ctx context.Context, held map[string]heldLock) error {
			now, err := d.shards.Layouts(ctx, merchants)
			if err != nil {
				return err
			}
			if !maps.Equal(now, layouts) {
				return errLayoutMoved
			}
			p.held = held
			return fn(ctx, p)
		})
		switch {
		case errors.Is(err, errLayoutMoved) && moves < maxLayoutMoves:
			continue
		case err != nil:
			return err
		}
		return d.folded(ctx, layouts)
	}
}

func (d *Deductor) folded(ctx context.Context, layouts map[string]shard.Layout) error {
	for m, l := range layouts {
		if err := d.shards.Folded(ctx, m, l); err != nil {
			return err
		}
	}
	return nil
}

func merchantsOf(events []event.PaymentSucceeded, idx []int) []string {
	ms := make([]string, len(idx))
	for k, i := range idx {
		ms[k] = events[i].MerchantID
	}
	return ms
}

// Reshard sets a merchant's shard count (1..shard.Max) and folds its quota
// into the new layout at once, under the locks of both layouts: in-flight
// deductions move to their events' new shards, the rest is split anew. A
// resharding left unfolded (a crash) is folded first.
func (d *Deductor) Reshard(ctx context.Context, merchantID string, n int) (shard.Layout, error) {
	if !event.ValidID(merchantID) {
		return shard.Layout{}, fmt.Errorf("deduct: merchant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", merchantID)
	}
	if err := d.fold(ctx, merchantID); err != nil {
		return shard.Layout{}, err
	}
	l, err := d.shards.Set(ctx, merchantID, n)
	if err != nil {
		return l, err
	}
	return l, d.fold(ctx, merchantID)
}

// fold rebalances a merchant with no events: the shards of its layout (and
// of the one it is resharded from) are rewritten from MySQL.
func (d *Deductor) fold(ctx context.Context, merchantID string) error {
	return d.widePass(ctx, nil, nil, []string{merchantID}, func(ctx context.Context, p *pass) error {
		_, err := d.rebalanceAll(ctx, p, nil)
		return err
	})
}

// inflight is a merchant's pending deductions not in the ledger, by event.
type inflight map[string]quota.Pending

// rebalanceAll is the wide pass's deduction: per merchant of p.layouts, read
// every shard (both layouts while folding), keep the pending deductions not in
// the ledger (moved to their events' shards), decide idx's events against
// MySQL's balance minus those, and rewrite the shards with the rest split
// evenly. Nobody else deducts meanwhile: the pass holds all the shard locks.
func (d *Deductor) rebalanceAll(ctx context.Context, p *pass, idx []int) (map[int]byte, error) {
	merchants := make([]string, 0, len(p.layouts))
	for m := range p.layouts {
		merchants = append(merchants, m)
	}
	slices.Sort(merchants)
	var keys, keyTags []string
	for _, m := range merchants {
		for _, t := range p.layouts[m].Tags(m) {
			keys, keyTags = append(keys, d.keys.Quota(t)), append(keyTags, t)
		}
	}
	raw, err := quota.Read(ctx, d.rdb, keys)
	if err != nil {
		return nil, err
	}
	pending := make(map[string]inflight, len(merchants))
	vers := make(map[string]int64, len(merchants))
	var ids []string
	for k, h := range raw {
		q, err := quota.Parse(h)
		if err != nil {
			return nil, fmt.Errorf("deduct: rebalance %s: %w", keys[k], err)
		}
		m := shard.Merchant(keyTags[k])
		if pending[m] == nil {
			pending[m] = make(inflight)
		}
		if v, _ := strconv.ParseInt(q.Ver, 10, 64); v > vers[m] {
			vers[m] = v
		}
		for _, pd := range q.Pending {
			if _, dup := pending[m][pd.EventID]; !dup {
				pending[m][pd.EventID] = pd
				ids = append(ids, pd.EventID)
			}
		}
	}
	existing, err := d.ledger.ExistingEvents(ctx, ids)
	if err != nil {
		return nil, err
	}
	bals, err := d.ledger.Balances(ctx, merchants)
	if err != nil {
		return nil, err
	}
	byMerchant := make(map[string][]int)
	for _, i := range idx {
		m := p.events[i].MerchantID
		byMerchant[m] = append(byMerchant[m], i)
	}
	codes := make(map[int]byte, len(idx))
	now := d.now()
	var calls []*quota.Call
	for _, m := range merchants {
		b, known := bals[m]
		if !known {
			for _, i := range byMerchant[m] {
				codes[i] = codeUnknown
			}
			continue
		}
		fly := pending[m]
		for id := range fly {
			if _, in := existing[id]; in {
				delete(fly, id) // recorded already: its settle was lost
			}
		}
		avail := b.Available()
		for _, pd := range fly {
			avail -= pd.Amount
		}
		if avail > maxExact {
			return nil, fmt.Errorf("deduct: balance %d of merchant %s exceeds 2^53-1, beyond exact Lua arithmetic", avail, m)
		}
		// What the policy lets the merchant spend: down to its lowest balance.
		free := int64(maxExact)
		if lowest, bounded := b.Policy().Lowest(); bounded {
			free = max(avail-lowest, 0)
		}
		wants := make([]want, len(byMerchant[m]))
		for k, i := range byMerchant[m] {
			wants[k] = want{id: p.events[i].EventID, amount: p.events[i].Amount}
		}
		cs, _ := decide(wants, fly, free)
		for k, i := range byMerchant[m] {
			codes[i] = cs[k]
			if cs[k] == codeDeducted {
				fly[wants[k].id] = quota.Pending{EventID: wants[k].id, Amount: wants[k].amount, At: now}
				avail -= wants[k].amount
			}
		}
		calls = append(calls, d.rewrite(m, p.layouts[m], p.held, fly, avail, b.Policy().RedisFloor(), max(vers[m]+1, now.UnixMicro()))...)
	}
	quota.Run(ctx, d.rdb, calls...)
	for _, c := range calls {
		if _, _, err := c.Reply(); err != nil {
			return nil, d.fenced(err, "rebalance")
		}
	}
	d.metrics.rebalances.Add(float64(len(merchants)))
	return codes, nil
}

// rewrite is the calls that lay a merchant's quota out over its shards: each
// pending deduction in its event's shard, left split evenly, and the shards of
// the layout being folded that the new one does not have deleted.
func (d *Deductor) rewrite(m string, l shard.Layout, held map[string]heldLock, fly inflight, avail int64, floor string, ver int64) []*quota.Call {
	remains, floors, pending := quota.Spread(avail, floor, slices.Collect(maps.Values(fly)), l.Shards)
	tags := l.Tags(m)
	calls := make([]*quota.Call, 0, len(tags))
	for k, t := range tags {
		h := held[t]
		if k >= l.Shards {
			calls = append(calls, d.dropCall(t, h))
			continue
		}
		calls = append(calls, quota.Rewrite(d.keys.Quota(t), h.key, h.token, remains[k], ver, floors[k], l.Shards, pending[k]))
	}
	return calls
}

// want is an event to decide in a rebalance.
type want struct {
	id     string
	amount int64
}

// decide settles a merchant's events of a wide pass in batch order, as the
// ledger's guard will judge them: an event already pending with its amount is
// reused (it is counted in flight), with another amount it is a conflict;
// else it is deducted while free covers it, or insufficient. It returns a
// code per event and what is left free.
func decide(wants []want, pending inflight, free int64) ([]byte, int64) {
	codes := make([]byte, len(wants))
	for k, w := range wants {
		pd, found := pending[w.id]
		switch {
		case found && pd.Amount == w.amount:
			codes[k] = codeReused
		case found:
			codes[k] = codePendingDiff
		case free >= w.amount:
			free -= w.amount
			codes[k] = codeDeducted
		default:
			codes[k] = codeNotEnough
		}
	}
	return codes, max(free, 0)
}
