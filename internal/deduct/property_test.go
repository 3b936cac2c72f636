package deduct

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

var (
	propSeed = flag.Uint64("deduct.seed", 0, "replay TestWritePathProperty with this seed (0: fresh seeds)")
	propRuns = flag.Int("deduct.runs", 12, "how many seeds TestWritePathProperty tries")
)

// TestWritePathProperty drives two holders of the write path through random
// interleavings, all in one goroutine so that a seed replays exactly: a holder
// paused past its lock's TTL while the other runs a batch (and grants land,
// and Redis is lowered, raised or emptied by hand), a holder killed between
// two steps, the same event_id for two merchants, redeliveries. Then every
// message is delivered once more, and the truth must hold: one ledger row per
// event, balances equal to the ledger sums, Redis equal to MySQL with no
// pending field, no merchant below zero, and no rejection that MySQL covered.
// Replay a failure with -deduct.seed=N.
func TestWritePathProperty(t *testing.T) {
	seeds := make([]uint64, *propRuns)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	if *propSeed != 0 {
		seeds = []uint64{*propSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("replay with -run 'TestWritePathProperty' -deduct.seed=%d", seed)
			newPropRun(t, seed).run()
		})
	}
}

type propRun struct {
	*env
	rng       *rand.Rand
	merchants []string
	pool      []event.PaymentSucceeded // every message ever produced, twins included
	holders   [2]*Deductor
	grants    int
	// lies: this run lowers, raises or empties caches by hand. Nothing but
	// the reconciler repairs a cache that lies high about a merchant that no
	// later payment exposes, so Redis is compared with MySQL only for the
	// merchants whose cache was never touched by hand.
	lies      bool
	corrupted map[string]bool
}

func newPropRun(t *testing.T, seed uint64) *propRun {
	p := &propRun{env: newEnv(t), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		merchants: []string{"m-0", "m-1", "m-2", "m-3"}, corrupted: make(map[string]bool)}
	p.lies = p.rng.IntN(2) == 0
	p.holders = [2]*Deductor{p.newDeductor(), p.newDeductor()}
	for _, m := range p.merchants[:3] { // m-3 stays unknown until a grant reaches it
		p.grant(m, p.rng.Int64N(50)+10)
	}
	for k := range 40 {
		ev := pay(fmt.Sprintf("e%d", k), p.pick(), p.rng.Int64N(8)+1)
		p.pool = append(p.pool, ev)
		if p.rng.IntN(10) == 0 { // the same event_id for another merchant
			twin := ev
			for twin.MerchantID == ev.MerchantID {
				twin.MerchantID = p.pick()
			}
			p.pool = append(p.pool, twin)
		}
	}
	return p
}

func (p *propRun) pick() string { return p.merchants[p.rng.IntN(len(p.merchants))] }

func (p *propRun) run() {
	for range 30 {
		switch p.rng.IntN(6) {
		case 0:
			p.randomGrant()
		case 1:
			if p.lies {
				p.corrupt()
			}
		default:
			p.interruptedBatch()
		}
	}
	// Everything is delivered once more; a redelivery may still meet a stale
	// cache, never an error.
	results := p.apply(p.holders[0], p.pool)
	p.check(results)
}

// interruptedBatch runs a batch on one holder that may be killed, or paused
// past its TTL while the other holder works, after a random step.
func (p *propRun) interruptedBatch() {
	h, other := p.holders[0], p.holders[1]
	if p.rng.IntN(2) == 0 {
		h, other = other, h
	}
	batch := p.batch()
	steps := []string{stepLocked, stepDeducted, stepCommitted, stepConfirmed}
	at, mode := steps[p.rng.IntN(len(steps))], p.rng.IntN(3) // 0 kill, 1 pause, 2 neither
	p.t.Logf("batch %s on holder %p, %s after %s", brief(batch), h, [...]string{"killed", "paused", "not stopped"}[mode], at)
	h.afterStep = func(s string) error {
		if s != at {
			return nil
		}
		if mode == 0 {
			p.expireLocks(batch) // a dead holder's locks run out
			return errKilled
		}
		if mode == 1 {
			p.expireLocks(batch) // so do a paused one's
			b := p.batch()
			res, err := other.Apply(context.Background(), b)
			p.t.Logf("  meanwhile %s on holder %p: %v %v", brief(b), other, outcomes(res), err)
			p.allowed(err)
			if p.rng.IntN(2) == 0 {
				p.randomGrant()
			}
			if p.lies && p.rng.IntN(2) == 0 {
				p.corrupt()
			}
		}
		return nil
	}
	defer func() { h.afterStep = nil }()
	res, err := h.Apply(context.Background(), batch)
	p.t.Logf("  -> %v %v", outcomes(res), err)
	if mode == 0 && errors.Is(err, errKilled) {
		return
	}
	p.allowed(err)
}

// allowed fails the test on an error a holder should not meet: only losing
// its lock (it was paused past the TTL) is expected.
func (p *propRun) allowed(err error) {
	p.t.Helper()
	if err != nil && !errors.Is(err, ErrLockLost) {
		p.t.Fatalf("Apply: %v", err)
	}
}

// batch is a few messages of the pool, new or redelivered.
func (p *propRun) batch() []event.PaymentSucceeded {
	n := p.rng.IntN(6) + 1
	out := make([]event.PaymentSucceeded, n)
	for i := range out {
		out[i] = p.pool[p.rng.IntN(len(p.pool))]
	}
	return out
}

// expireLocks deletes the locks of the batch's merchants, as their TTL would.
func (p *propRun) expireLocks(batch []event.PaymentSucceeded) {
	for _, ev := range batch {
		if err := p.redis.Client.Del(context.Background(), p.redis.Keys.Lock(ev.MerchantID)).Err(); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p *propRun) randomGrant() {
	p.grants++
	m, amount := p.pick(), p.rng.Int64N(20)+1
	p.t.Logf("grant %d to %s", amount, m)
	if _, err := p.d.Grant(context.Background(), m, amount, fmt.Sprintf("g%d", p.grants)); err != nil {
		p.t.Fatalf("grant to %s: %v", m, err)
	}
}

// corrupt makes one merchant's cache lie: lower, higher, or gone.
func (p *propRun) corrupt() {
	m := p.pick()
	p.corrupted[m] = true
	ctx, key := context.Background(), p.redis.Keys.Quota(m)
	var err error
	how := max(p.rng.IntN(4)-1, 0) // zeroed twice as often: the lie that must not reject
	p.t.Logf("cache of %s %s by hand", m, [...]string{"zeroed", "raised", "deleted"}[how])
	switch how {
	case 0:
		err = p.redis.Client.HSet(ctx, key, quota.FieldRemain, 0).Err()
	case 1:
		err = p.redis.Client.HIncrBy(ctx, key, quota.FieldRemain, p.rng.Int64N(50)+1).Err()
	default:
		err = p.redis.Client.Del(ctx, key).Err()
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

func brief(batch []event.PaymentSucceeded) string {
	var b []byte
	for _, ev := range batch {
		b = fmt.Appendf(b, "%s/%s/%d ", ev.EventID, ev.MerchantID, ev.Amount)
	}
	return string(b)
}

func (p *propRun) check(final []Result) {
	t := p.t
	ctx := context.Background()
	var ids []string
	for i, ev := range p.pool {
		ids = append(ids, ev.EventID)
		switch final[i].Outcome {
		case Applied, Duplicate, Insufficient, UnknownMerchant, Conflict:
		default:
			t.Errorf("message %s of %s: final outcome %+v", ev.EventID, ev.MerchantID, final[i])
		}
	}
	var found []ledger.Row
	if err := p.mysql.DB.WithContext(ctx).Where("event_id IN ?", ids).Find(&found).Error; err != nil {
		t.Fatal(err)
	}
	rows := make(map[string]ledger.Row, len(found))
	for _, r := range found {
		rows[r.EventID] = r
	}
	for _, ev := range p.pool {
		row, found := rows[ev.EventID]
		switch {
		case !found:
			t.Errorf("event %s: no ledger row (lost)", ev.EventID)
		case !slices.ContainsFunc(p.pool, func(m event.PaymentSucceeded) bool {
			return m.EventID == row.EventID && m.MerchantID == row.MerchantID && m.Amount == row.Amount
		}):
			t.Errorf("event %s: row %+v matches no message", ev.EventID, row)
		case row.Kind == ledger.KindRejected && row.Reason == ledger.ReasonInsufficient &&
			(row.BalanceAfter == nil || *row.BalanceAfter >= row.Amount):
			t.Errorf("event %s: rejected as insufficient while MySQL had %v for %d", ev.EventID, value(row.BalanceAfter), row.Amount)
		case row.Kind == ledger.KindRejected && row.Reason == ledger.ReasonUnknownMerchant && row.BalanceAfter != nil:
			t.Errorf("event %s: rejected as unknown while MySQL had a balance row", ev.EventID)
		}
	}
	for m, b := range p.balances() {
		if b.Available() < 0 {
			t.Errorf("merchant %s overdrawn: %+v", m, b)
		}
	}
	p.checkConsistent(p.corrupted) // balances = ledger sums; no p: field; Redis = MySQL (or missing)
}
