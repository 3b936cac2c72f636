package deduct

import (
	"context"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
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

// deductAll runs one deduction per merchant, all in one pipeline. Merchants
// whose hash is missing are read from MySQL in one query, then hydrated and
// deducted in a second pipeline; those without a balance row are unknown and
// get codeUnknown, and no key. It returns a code per event index.
func (d *Deductor) deductAll(ctx context.Context, held map[string]HeldLock, events []event.PaymentSucceeded, idx []int) (map[int]byte, error) {
	codes := make(map[int]byte, len(idx))
	todo := groupByMerchant(events, idx)
	hydrate := make(map[string]int64)
	nowMs := d.now().UnixMilli()
	for round := 0; len(todo) > 0; round++ {
		if round == 3 {
			return nil, fmt.Errorf("deduct: quota of merchant %s is missing again right after hydration", todo[0].merchant)
		}
		var calls, hydrates []*scriptCall
		deducts := make([]*scriptCall, len(todo))
		for k, g := range todo {
			l := held[g.merchant]
			keys := []string{d.keys.Quota(g.merchant), l.Key()}
			if v, ok := hydrate[g.merchant]; ok {
				h := &scriptCall{script: d.scripts.hydrate, keys: keys, args: []any{l.Token(), v, d.now().UnixMicro()}}
				calls, hydrates = append(calls, h), append(hydrates, h)
			}
			args := make([]any, 0, 2+2*len(g.events))
			args = append(args, l.Token(), nowMs)
			for _, i := range g.events {
				args = append(args, events[i].EventID, events[i].Amount)
			}
			deducts[k] = &scriptCall{script: d.scripts.deduct, keys: keys, args: args}
			calls = append(calls, deducts[k])
		}
		runAll(ctx, d.rdb, calls)
		for _, h := range hydrates {
			r, err := parseReply(h.cmd)
			if err != nil {
				return nil, fmt.Errorf("deduct: hydrate %s: %w", h.keys[0], err)
			}
			if r.status == "lock" {
				return nil, fmt.Errorf("%w: fenced hydrate of %s", ErrLockLost, h.keys[0])
			}
			if n, _ := r.values[0].(int64); n == 1 {
				d.metrics.hydrations.Inc()
			}
		}
		var missing []group
		for k, g := range todo {
			r, err := parseReply(deducts[k].cmd)
			if err != nil {
				return nil, fmt.Errorf("deduct: deduct merchant %s: %w", g.merchant, err)
			}
			switch r.status {
			case "lock":
				return nil, fmt.Errorf("%w: fenced deduction of merchant %s", ErrLockLost, g.merchant)
			case "missing":
				missing = append(missing, g)
			case "ok":
				s, _ := r.values[1].(string)
				if len(s) != len(g.events) {
					return nil, fmt.Errorf("deduct: merchant %s: %d codes for %d events", g.merchant, len(s), len(g.events))
				}
				for j, i := range g.events {
					codes[i] = s[j]
				}
			default:
				return nil, fmt.Errorf("deduct: merchant %s: unexpected script status %q", g.merchant, r.status)
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
			if b.Available() > maxExact {
				return nil, fmt.Errorf("deduct: balance %d of merchant %s exceeds 2^53-1, beyond exact Lua arithmetic", b.Available(), g.merchant)
			}
			hydrate[g.merchant] = b.Available()
			todo = append(todo, g)
		}
	}
	return codes, nil
}

// settlement is what a batch tells Redis once MySQL has it, per merchant:
// the events it recorded as debits, and those that ended without one.
type settlement map[string]*settled

type settled struct{ debited, ended []string }

func (s *settlement) add(merchant string) *settled {
	if *s == nil {
		*s = make(settlement)
	}
	m := (*s)[merchant]
	if m == nil {
		m = &settled{}
		(*s)[merchant] = m
	}
	return m
}

func (s *settlement) debited(ev event.PaymentSucceeded) {
	m := s.add(ev.MerchantID)
	m.debited = append(m.debited, ev.EventID)
}

func (s *settlement) ended(ev event.PaymentSucceeded) {
	m := s.add(ev.MerchantID)
	m.ended = append(m.ended, ev.EventID)
}

// settleAll runs the settle script for every merchant, in one pipeline: the
// p: fields of the batch's debits are deleted, and a hash holding a p: field
// of an event that ended without a debit of this batch is dropped (see
// settle.lua), so that Redis never keeps a deduction MySQL does not have.
func (d *Deductor) settleAll(ctx context.Context, held map[string]HeldLock, s settlement) error {
	calls := make([]*scriptCall, 0, len(s))
	for m, st := range s {
		l := held[m]
		args := make([]any, 0, 2+len(st.debited)+len(st.ended))
		args = append(args, l.Token(), len(st.debited))
		for _, id := range st.debited {
			args = append(args, id)
		}
		for _, id := range st.ended {
			args = append(args, id)
		}
		calls = append(calls, &scriptCall{script: d.scripts.settle, keys: []string{d.keys.Quota(m), l.Key()}, args: args})
	}
	runAll(ctx, d.rdb, calls)
	for _, c := range calls {
		if err := fenced(c, "settle"); err != nil {
			return err
		}
		if r, _ := parseReply(c.cmd); len(r.values) == 2 && r.values[1] == int64(1) {
			d.metrics.staleRehydrations.WithLabelValues("unmatched").Inc()
			d.log.Warn("quota cache held a deduction no debit matches, dropped to rehydrate", zap.String("key", c.keys[0]))
		}
	}
	return nil
}

// drop deletes a merchant's quota hash (fenced), so the next deduction hydrates it from MySQL.
func (d *Deductor) drop(ctx context.Context, l HeldLock, merchantID string) error {
	c := &scriptCall{script: d.scripts.drop, keys: []string{d.keys.Quota(merchantID), l.Key()}, args: []any{l.Token()}}
	runAll(ctx, d.rdb, []*scriptCall{c})
	return fenced(c, "drop")
}

// fenced checks the reply of a script that answers {'lock'} or {'ok', n}.
func fenced(c *scriptCall, what string) error {
	r, err := parseReply(c.cmd)
	if err != nil {
		return fmt.Errorf("deduct: %s %s: %w", what, c.keys[0], err)
	}
	if r.status == "lock" {
		return fmt.Errorf("%w: fenced %s of %s", ErrLockLost, what, c.keys[0])
	}
	return nil
}
