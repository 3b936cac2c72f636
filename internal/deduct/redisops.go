package deduct

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

// Codes of the deduction script, per event, plus codeUnknown set in Go.
const (
	codeDeducted    = 'D'
	codeReused      = 'P'
	codeNotEnough   = 'I'
	codePendingDiff = 'C'
	codeUnknown     = 'U' // no merchant_balance row: nothing written to Redis
	// codeWide: a shard of a sharded merchant cannot decide the event (a
	// missing shard, another layout in MySQL): the wide pass decides it under
	// all the merchant's shard locks. Not enough in a shard is an ordinary
	// insufficient: the ledger writes the rejection only if MySQL's balance
	// cannot cover it either, else the batch is redone and the shard's
	// events, their shards dropped, go to the wide pass (a rebalance).
	codeWide = 'W'
)

// maxExact is the largest balance the scripts handle exactly (Lua numbers are doubles).
const maxExact = 1<<53 - 1

// group is one shard's events of a batch, in batch order.
type group struct {
	tag, merchant string
	shards        int // the shard count the events were routed by
	events        []int
}

// sharded says whether the group is a shard of a sharded merchant.
func (g group) sharded() bool { return g.tag != g.merchant }

func groupByTag(events []event.PaymentSucceeded, tags []string, counts []int, idx []int) []group {
	at := make(map[string]int)
	var groups []group
	for _, i := range idx {
		t := tags[i]
		k, ok := at[t]
		if !ok {
			k = len(groups)
			at[t] = k
			groups = append(groups, group{tag: t, merchant: events[i].MerchantID, shards: counts[i]})
		}
		groups[k].events = append(groups[k].events, i)
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a].tag < groups[b].tag })
	return groups
}

//go:embed deduct.lua
var deductSrc string

// deductAll runs one deduction per shard in one pipeline; missing hashes of
// unsharded merchants are read from MySQL in one query, then hydrated and
// deducted in a second (no balance row: codeUnknown, no key). What a shard of
// a sharded merchant cannot decide is left to the wide pass (codeWide). It
// returns a code per event index.
func (d *Deductor) deductAll(ctx context.Context, p *pass, idx []int) (map[int]byte, error) {
	events, held := p.events, p.held
	codes := make(map[int]byte, len(idx))
	todo := groupByTag(events, p.tags, p.counts, idx)
	hydrate := make(map[string]ledger.Balance)
	nowMs := d.now().UnixMilli()
	for round := 0; len(todo) > 0; round++ {
		if round == 3 {
			return nil, fmt.Errorf("deduct: quota of merchant %s is missing again right after hydration", todo[0].merchant)
		}
		var calls, hydrates []*quota.Call
		deducts := make([]*quota.Call, len(todo))
		for k, g := range todo {
			l := held[g.tag]
			key := d.keys.Quota(g.tag)
			if b, ok := hydrate[g.merchant]; ok {
				h := quota.Hydrate(key, l.key, l.token, b.Available(), b.Policy().RedisFloor(), d.now())
				calls, hydrates = append(calls, h), append(hydrates, h)
			}
			args := make([]any, 0, 3+2*len(g.events))
			args = append(args, l.token, nowMs, g.shards)
			for _, i := range g.events {
				args = append(args, events[i].EventID, events[i].Amount)
			}
			deducts[k] = &quota.Call{Script: d.deductLua, Keys: []string{key, l.key}, Args: args}
			calls = append(calls, deducts[k])
		}
		quota.Run(ctx, d.rdb, calls...)
		for _, h := range hydrates {
			wrote, err := h.Wrote()
			if err != nil {
				return nil, d.fenced(err, "hydrate")
			}
			if wrote {
				d.metrics.hydrations.Inc()
			}
		}
		var missing []group
		for k, g := range todo {
			status, values, err := deducts[k].Reply()
			if err != nil {
				return nil, d.fenced(err, "deduct")
			}
			switch {
			case status == "layout" || (status == "missing" && g.sharded()):
				for _, i := range g.events {
					codes[i] = codeWide
				}
			case status == "missing":
				missing = append(missing, g)
			case status == "ok":
				s, _ := values[1].(string)
				if len(s) != len(g.events) {
					return nil, fmt.Errorf("deduct: shard %s: %d codes for %d events", g.tag, len(s), len(g.events))
				}
				for j, i := range g.events {
					codes[i] = s[j]
				}
			default:
				return nil, fmt.Errorf("deduct: merchant %s: unexpected script status %q", g.merchant, status)
			}
		}
		if len(missing) == 0 {
			break
		}
		ms := make([]string, len(missing))
		for k, g := range missing {
			ms[k] = g.merchant
		}
		bals, err := d.ledger.Balances(ctx, ms)
		if err != nil {
			return nil, err
		}
		// Hydrating quota:{m} is right only while m has one shard: a
		// resharding may have folded it away since the event was routed.
		layouts, err := d.shards.Layouts(ctx, ms)
		if err != nil {
			return nil, err
		}
		todo = nil
		for _, g := range missing {
			if layouts[g.merchant] != (shard.Layout{Shards: 1}) {
				for _, i := range g.events {
					codes[i] = codeWide
				}
				continue
			}
			b, known := bals[g.merchant]
			if !known {
				for _, i := range g.events {
					codes[i] = codeUnknown
				}
				continue
			}
			if b.Available() > maxExact || b.Available() < -maxExact {
				return nil, fmt.Errorf("deduct: balance %d of merchant %s is beyond ±(2^53-1), past exact Lua arithmetic", b.Available(), g.merchant)
			}
			hydrate[g.merchant] = b
			todo = append(todo, g)
		}
	}
	return codes, nil
}

// settlement is what a batch tells Redis once MySQL has it, per shard (tag):
// the events it recorded as debits, and those that ended without one.
type settlement map[string]*settled

type settled struct{ debited, ended []string }

func (s *settlement) of(tag string) *settled {
	if *s == nil {
		*s = make(settlement)
	}
	if (*s)[tag] == nil {
		(*s)[tag] = &settled{}
	}
	return (*s)[tag]
}

func (s *settlement) debited(tag string, ev event.PaymentSucceeded) {
	s.of(tag).debited = append(s.of(tag).debited, ev.EventID)
}
func (s *settlement) ended(tag string, ev event.PaymentSucceeded) {
	s.of(tag).ended = append(s.of(tag).ended, ev.EventID)
}

//go:embed settle.lua
var settleSrc string

// settleAll runs settle.lua for every shard in one pipeline: Redis never
// keeps a deduction MySQL does not have.
func (d *Deductor) settleAll(ctx context.Context, held map[string]heldLock, s settlement) error {
	calls := make([]*quota.Call, 0, len(s))
	tags := make([]string, 0, len(s)) // tags[k] is calls[k]'s
	for t, st := range s {
		tags = append(tags, t)
		l := held[t]
		args := make([]any, 0, 2+len(st.debited)+len(st.ended))
		args = append(args, l.token, len(st.debited))
		for _, id := range st.debited {
			args = append(args, id)
		}
		for _, id := range st.ended {
			args = append(args, id)
		}
		calls = append(calls, &quota.Call{Script: d.settleLua, Keys: []string{d.keys.Quota(t), l.key}, Args: args})
	}
	quota.Run(ctx, d.rdb, calls...)
	for k, c := range calls {
		_, values, err := c.Reply()
		if err != nil {
			return d.fenced(err, "settle")
		}
		if len(values) == 2 && values[1] == int64(1) {
			d.metrics.staleRehydrations.WithLabelValues("unmatched").Inc()
			d.log.Warn("quota cache held a deduction no debit matches, dropped to rehydrate",
				zap.String("merchant_id", shard.Merchant(tags[k])), zap.String("key", c.Keys[0]))
		}
	}
	return nil
}

//go:embed drop.lua
var dropSrc string

// drop deletes every held shard of the merchants (fenced), in one pipeline,
// so the next deduction hydrates or rebalances them from MySQL.
func (d *Deductor) drop(ctx context.Context, held map[string]heldLock, merchantIDs ...string) error {
	var calls []*quota.Call
	for t, l := range held {
		if slices.Contains(merchantIDs, shard.Merchant(t)) {
			calls = append(calls, d.dropCall(t, l))
		}
	}
	quota.Run(ctx, d.rdb, calls...)
	for _, c := range calls {
		if _, _, err := c.Reply(); err != nil {
			return d.fenced(err, "drop")
		}
	}
	return nil
}

// dropCall is the fenced deletion of a shard's hash.
func (d *Deductor) dropCall(tag string, l heldLock) *quota.Call {
	return &quota.Call{Script: d.dropLua, Keys: []string{d.keys.Quota(tag), l.key}, Args: []any{l.token}}
}

// fenced names a failed script call; a lock found not ours is ErrLockLost,
// counted by script.
func (d *Deductor) fenced(err error, what string) error {
	switch {
	case errors.Is(err, quota.ErrNotHeld):
		d.metrics.fenced.WithLabelValues(what).Inc()
		return fmt.Errorf("%w: fenced %s: %w", ErrLockLost, what, err)
	case err != nil:
		return fmt.Errorf("deduct: %s: %w", what, err)
	}
	return nil
}
