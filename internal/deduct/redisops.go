package deduct

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

// Codes of the deduction script, per event, plus codeUnknown set in Go.
const (
	codeDeducted    = 'D'
	codeReused      = 'P'
	codeNotEnough   = 'I'
	codePendingDiff = 'C'
	codeUnknown     = 'U' // no merchant_balance row: nothing written to Redis
)

// maxExact is the largest balance the scripts handle exactly (Lua numbers are doubles).
const maxExact = 1<<53 - 1

// group is one merchant's events of a batch, in batch order.
type group struct {
	merchant string
	events   []int
}

func groupByMerchant(events []event.PaymentSucceeded, idx []int) []group {
	at := make(map[string]int)
	var groups []group
	for _, i := range idx {
		m := events[i].MerchantID
		k, ok := at[m]
		if !ok {
			k = len(groups)
			at[m] = k
			groups = append(groups, group{merchant: m})
		}
		groups[k].events = append(groups[k].events, i)
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a].merchant < groups[b].merchant })
	return groups
}

//go:embed deduct.lua
var deductSrc string

// deductAll runs one deduction per merchant in one pipeline; missing hashes
// are read from MySQL in one query, then hydrated and deducted in a second
// (no balance row: codeUnknown, no key). It returns a code per event index.
func (d *Deductor) deductAll(ctx context.Context, held map[string]heldLock, events []event.PaymentSucceeded, idx []int) (map[int]byte, error) {
	codes := make(map[int]byte, len(idx))
	todo := groupByMerchant(events, idx)
	hydrate := make(map[string]ledger.Balance)
	nowMs := d.now().UnixMilli()
	for round := 0; len(todo) > 0; round++ {
		if round == 3 {
			return nil, fmt.Errorf("deduct: quota of merchant %s is missing again right after hydration", todo[0].merchant)
		}
		var calls, hydrates []*quota.Call
		deducts := make([]*quota.Call, len(todo))
		for k, g := range todo {
			l := held[g.merchant]
			key := d.keys.Quota(g.merchant)
			if b, ok := hydrate[g.merchant]; ok {
				h := quota.Hydrate(key, l.key, l.token, b.Available(), b.Policy().RedisFloor(), d.now())
				calls, hydrates = append(calls, h), append(hydrates, h)
			}
			args := make([]any, 0, 2+2*len(g.events))
			args = append(args, l.token, nowMs)
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
			switch status {
			case "missing":
				missing = append(missing, g)
			case "ok":
				s, _ := values[1].(string)
				if len(s) != len(g.events) {
					return nil, fmt.Errorf("deduct: merchant %s: %d codes for %d events", g.merchant, len(s), len(g.events))
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
		todo = nil
		for _, g := range missing {
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

// settlement is what a batch tells Redis once MySQL has it, per merchant:
// the events it recorded as debits, and those that ended without one.
type settlement map[string]*settled

type settled struct{ debited, ended []string }

func (s *settlement) of(ev event.PaymentSucceeded) *settled {
	if *s == nil {
		*s = make(settlement)
	}
	if (*s)[ev.MerchantID] == nil {
		(*s)[ev.MerchantID] = &settled{}
	}
	return (*s)[ev.MerchantID]
}

func (s *settlement) debited(ev event.PaymentSucceeded) {
	s.of(ev).debited = append(s.of(ev).debited, ev.EventID)
}
func (s *settlement) ended(ev event.PaymentSucceeded) {
	s.of(ev).ended = append(s.of(ev).ended, ev.EventID)
}

//go:embed settle.lua
var settleSrc string

// settleAll runs settle.lua for every merchant in one pipeline: Redis never
// keeps a deduction MySQL does not have.
func (d *Deductor) settleAll(ctx context.Context, held map[string]heldLock, s settlement) error {
	calls := make([]*quota.Call, 0, len(s))
	merchants := make([]string, 0, len(s)) // merchants[k] is calls[k]'s
	for m, st := range s {
		merchants = append(merchants, m)
		l := held[m]
		args := make([]any, 0, 2+len(st.debited)+len(st.ended))
		args = append(args, l.token, len(st.debited))
		for _, id := range st.debited {
			args = append(args, id)
		}
		for _, id := range st.ended {
			args = append(args, id)
		}
		calls = append(calls, &quota.Call{Script: d.settleLua, Keys: []string{d.keys.Quota(m), l.key}, Args: args})
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
				zap.String("merchant_id", merchants[k]), zap.String("key", c.Keys[0]))
		}
	}
	return nil
}

//go:embed drop.lua
var dropSrc string

// drop deletes the merchants' quota hashes (fenced), in one pipeline, so the
// next deduction hydrates each from MySQL.
func (d *Deductor) drop(ctx context.Context, held map[string]heldLock, merchantIDs ...string) error {
	calls := make([]*quota.Call, len(merchantIDs))
	for i, m := range merchantIDs {
		l := held[m]
		calls[i] = &quota.Call{Script: d.dropLua, Keys: []string{d.keys.Quota(m), l.key}, Args: []any{l.token}}
	}
	quota.Run(ctx, d.rdb, calls...)
	for _, c := range calls {
		if _, _, err := c.Reply(); err != nil {
			return d.fenced(err, "drop")
		}
	}
	return nil
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
