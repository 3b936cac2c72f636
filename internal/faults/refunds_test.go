package faults

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/scenario"
)

// refundStorm is a refund storm's traffic and its reference model: what each
// merchant's balance must end at, and which refunds must end as conflicts
// or pending, whatever the order the two topics interleave in.
type refundStorm struct {
	merchants []string
	small     map[string]int64 // each merchant's expiring grant: exactly its early payments
	early     []event.PaymentSucceeded
	payments  []event.PaymentSucceeded // after the expiry
	before    []event.RefundCommand    // refunds produced before their payment
	during    []event.RefundCommand    // produced with the payments (duplicates included)
	terms     []event.RefundCommand    // ids sent again with other terms: conflicts
	balance   map[string]int64         // the model's final available balance
	conflicts int                      // distinct refunds dead-lettered for a part beyond the debit
	pending   int                      // refunds of payments that never come
}

const stormBig = 1_000_000 // each merchant's never-expiring grant: no payment is ever rejected

// newRefundStorm draws n payments over m merchants and about refunds refunds of
// every kind: partial, two partials, whole, over-refunded, whole then
// partial, duplicated, before their payment, after their grant expired, of
// a payment that never comes.
func newRefundStorm(seed uint64, m, n int) *refundStorm {
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &refundStorm{small: map[string]int64{}, balance: map[string]int64{}}
	for i := range m {
		s.merchants = append(s.merchants, fmt.Sprintf("storm-m%02d", i))
	}
	now := time.Now().UTC()
	pay := func(k int, merchant string) event.PaymentSucceeded {
		id := fmt.Sprintf("storm-p%05d", k)
		return event.PaymentSucceeded{EventID: id, PaymentID: "pay-" + id, MerchantID: merchant, Amount: 2 + rng.Int64N(8),
			Source: event.SourcePC, OccurredAt: now}
	}
	k := 0
	for _, mer := range s.merchants {
		for range 3 {
			p := pay(k, mer)
			k++
			s.early, s.small[mer] = append(s.early, p), s.small[mer]+p.Amount
		}
		s.balance[mer] = stormBig
	}
	for k < n {
		s.payments = append(s.payments, pay(k, s.merchants[rng.IntN(m)]))
		k++
	}
	for _, p := range append(s.early, s.payments...) {
		s.balance[p.MerchantID] -= p.Amount
	}
	refund := func(id string, p event.PaymentSucceeded, amount int64) event.RefundCommand {
		return event.RefundCommand{RefundID: id, EventID: p.EventID, MerchantID: p.MerchantID, Amount: amount,
			Reason: []string{event.RefundReasonRefund, event.RefundReasonChargeback, event.RefundReasonCorrection}[rng.IntN(3)], OccurredAt: now}
	}
	// Every early payment, refunded once its grant has expired: nothing comes back.
	for i, p := range s.early {
		s.during = append(s.during, refund(fmt.Sprintf("storm-rx%d", i), p, 1+rng.Int64N(p.Amount)))
	}
	// Each later payment has at most one kind of refund; the model gives back
	// min(amount, what its refunds ask).
	order := rng.Perm(len(s.payments))
	next := 0
	take := func() event.PaymentSucceeded { p := s.payments[order[next]]; next++; return p }
	give := func(p event.PaymentSucceeded, asked int64) { s.balance[p.MerchantID] += min(p.Amount, asked) }
	for i := range 400 { // before their payment, partial or whole
		p := take()
		a := 1 + rng.Int64N(p.Amount)
		s.before = append(s.before, refund(fmt.Sprintf("storm-rb%d", i), p, a))
		give(p, a)
	}
	for i := range 800 { // partial, 150 of them sent twice
		p := take()
		r := refund(fmt.Sprintf("storm-rp%d", i), p, 1+rng.Int64N(p.Amount-1))
		s.during = append(s.during, r)
		if i < 150 {
			s.during = append(s.during, r)
		}
		give(p, r.Amount)
	}
	for i := range 300 { // two partials within the debit
		p := take()
		a := 1 + rng.Int64N(p.Amount-1)
		b := 1 + rng.Int64N(p.Amount-a)
		s.during = append(s.during, refund(fmt.Sprintf("storm-r2a%d", i), p, a), refund(fmt.Sprintf("storm-r2b%d", i), p, b))
		give(p, a+b)
	}
	for i := range 400 { // whole
		p := take()
		s.during = append(s.during, refund(fmt.Sprintf("storm-rw%d", i), p, p.Amount))
		give(p, p.Amount)
	}
	for i := range 200 { // over-refunded: the part beyond is a conflict
		p := take()
		s.during = append(s.during, refund(fmt.Sprintf("storm-ro%d", i), p, p.Amount+1+rng.Int64N(3)))
		give(p, p.Amount)
		s.conflicts++
	}
	for i := range 150 { // whole and partial: whichever comes second has a part beyond
		p := take()
		s.during = append(s.during, refund(fmt.Sprintf("storm-rwa%d", i), p, p.Amount), refund(fmt.Sprintf("storm-rwb%d", i), p, 1+rng.Int64N(p.Amount)))
		give(p, p.Amount)
		s.conflicts++
	}
	for i := range 30 { // of a payment that never comes
		ghost := event.PaymentSucceeded{EventID: fmt.Sprintf("storm-ghost%d", i), MerchantID: s.merchants[rng.IntN(m)], Amount: 5}
		s.during = append(s.during, refund(fmt.Sprintf("storm-rg%d", i), ghost, 1+rng.Int64N(5)))
		s.pending++
	}
	rng.Shuffle(len(s.during), func(i, j int) { s.during[i], s.during[j] = s.during[j], s.during[i] })
	for _, r := range s.during[:100] { // ids sent again, later, with other terms
		r.Amount++
		s.terms = append(s.terms, r)
	}
	return s
}

func refundMessages(rs []event.RefundCommand) []kafka.Message {
	out := make([]kafka.Message, len(rs))
	for i, r := range rs {
		out[i] = kafka.Message{Key: []byte(r.MerchantID), Value: r.Encode()}
	}
	return out
}

func paymentMessages(ps []event.PaymentSucceeded) []kafka.Message {
	out := make([]kafka.Message, len(ps))
	for i, p := range ps {
		out[i] = kafka.Message{Key: []byte(p.MerchantID), Value: p.Encode()}
	}
	return out
}

// A refund storm: 10,000 payments and 3,000 refund messages of every kind
// (partial, whole, duplicated, over-refunded, before their payment, after
// their grant expired, of a payment that never comes), interleaved on two
// topics, with a worker process SIGKILLed midway and the whole refunds topic
// delivered again (and some ids with other terms). Every balance is the
// reference model's, no refund is applied twice or beyond its payment's
// debit (the invariant checker), and nothing is dead-lettered but the
// conflicts the model names.
func TestRefundStorm(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), size(4*time.Minute, 15*time.Minute))
	defer cancel()
	p := newPlan(t)
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	refunds := g.kafka.Topic(t, 4)
	s := newRefundStorm(p.seed(), 40, 10_000)
	expires := time.Now().UTC().Add(time.Hour) // moved up once the early payments are in
	for _, m := range s.merchants {
		prio := 1
		exp := expires
		if _, err := g.granter.GrantBatch(ctx, []event.GrantCommand{
			{GrantID: "storm-small-" + m, MerchantID: m, Amount: s.small[m], Source: "storm", Priority: &prio, ExpiresAt: &exp},
			{GrantID: "storm-big-" + m, MerchantID: m, Amount: stormBig, Source: "storm"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"KAFKA_REFUNDS_TOPIC": refunds}
	procs := []*proc{g.startProc(1, env), g.startProc(2, env)}
	// The early payments use the expiring grants up; the refunds of later
	// payments wait for them.
	g.produceTo(ctx, g.topic, paymentMessages(s.early))
	g.produceTo(ctx, refunds, refundMessages(s.before))
	g.drain(ctx, time.Minute)
	var left int64
	if err := g.db.SQL.QueryRowContext(ctx, "SELECT COALESCE(SUM(CASE WHEN g.grant_id = b.head_grant THEN b.head_end - b.debited ELSE g.remaining END), -1) "+
		"FROM quota_grants g JOIN merchant_balance b ON b.merchant_id = g.merchant_id WHERE g.grant_id LIKE 'storm-small-%'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d units of the expiring grants left after the early payments (%v)", left, err)
	}
	// Their expiry comes: used up, they leave nothing to expire (no row), and
	// no refund may give them units back.
	if _, err := g.db.SQL.ExecContext(ctx, "UPDATE quota_grants SET expires_at = UTC_TIMESTAMP(6) WHERE grant_id LIKE 'storm-small-%'"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.db.SQL.ExecContext(ctx, "UPDATE merchant_balance SET next_expiry = NULL WHERE merchant_id LIKE 'storm-m%'"); err != nil {
		t.Fatal(err)
	}

	// The storm: payments and refunds at once, a worker killed midway.
	pays := p.startLoad(ctx, paymentMessages(s.payments), size(2000, 2000))
	rfs := g.produceAtRateTo(ctx, refunds, refundMessages(s.during), size(600, 600), false)
	p.await(ctx, between(p.rng, 2*time.Second, 4*time.Second))
	victim := procs[p.rng.IntN(len(procs))]
	p.fired(ctx, "kill", victim.name, "")
	victim.Kill()
	time.Sleep(between(p.rng, 0, time.Second))
	victim.Start()
	for _, l := range []*load{pays, rfs} {
		if err := l.wait(); err != nil {
			t.Fatal(err)
		}
	}
	p.expect("kill", 1)
	drainRefunds := func() {
		if err := scenario.WaitDrained(ctx, g.client(), g.group+".refunds", refunds, nil); err != nil {
			t.Fatal(err)
		}
	}
	g.drain(ctx, 2*time.Minute)
	drainRefunds()
	// The refunds topic delivered again, whole, and ids with other terms.
	g.produceTo(ctx, refunds, append(refundMessages(append(s.before, s.during...)), refundMessages(s.terms)...))
	drainRefunds()
	for _, p := range procs {
		p.Stop()
	}

	// The reference model's balances.
	for _, m := range s.merchants {
		var avail int64
		if err := g.db.SQL.QueryRowContext(ctx, "SELECT credited - debited - ? FROM merchant_balance WHERE merchant_id = ?", s.small[m], m).Scan(&avail); err != nil {
			t.Fatal(err)
		}
		if avail != s.balance[m] {
			t.Errorf("%s: balance %d (beyond its expiring grant), the model says %d", m, avail, s.balance[m])
		}
	}
	var pending, applied int64
	if err := g.db.SQL.QueryRowContext(ctx, "SELECT COALESCE(SUM(state = 'pending'), 0), COALESCE(SUM(state = 'applied'), 0) FROM quota_refunds").Scan(&pending, &applied); err != nil {
		t.Fatal(err)
	}
	if pending != int64(s.pending) {
		t.Errorf("%d refunds pending, the model says %d (those of payments that never come)", pending, s.pending)
	}
	t.Logf("%d refunds applied, %d pending", applied, pending)
	// Dead letters: of the payments none; of the refunds only conflicts: each
	// id with other terms, and exactly the refunds recorded with a part
	// beyond their payment's debit (at least once: a refund that waited for
	// its payment is dead-lettered when delivered again).
	var payRecs []dlq.Record
	beyond := map[string]bool{}
	terms := map[string]int{}
	for _, r := range s.terms {
		terms[r.RefundID]++
	}
	for _, r := range g.readDLQ(ctx) {
		if r.OriginalTopic != refunds {
			payRecs = append(payRecs, r)
			continue
		}
		c, err := event.DecodeRefund(r.Key, r.Value)
		switch {
		case err != nil:
			t.Fatal(err)
		case r.Class != dlq.ClassConflict:
			t.Errorf("refund %s dead-lettered as %s: %s", c.RefundID, r.Class, r.Message)
		case strings.Contains(r.Message, "exceeds what payment"):
			beyond[c.RefundID] = true
		case strings.Contains(r.Message, "is recorded as"):
			terms[c.RefundID]--
		default:
			t.Errorf("refund %s dead-lettered: %s", c.RefundID, r.Message)
		}
	}
	for id, n := range terms {
		if n > 0 {
			t.Errorf("refund %s sent with other terms was not dead-lettered", id)
		}
	}
	rows, err := g.db.SQL.QueryContext(ctx, "SELECT refund_id FROM quota_refunds WHERE beyond > 0 AND state = 'applied'")
	if err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		recorded++
		if !beyond[id] {
			t.Errorf("refund %s is recorded beyond its debit but was never dead-lettered", id)
		}
	}
	rows.Close()
	if recorded != s.conflicts || len(beyond) != s.conflicts {
		t.Errorf("%d refunds recorded beyond their debit, %d dead-lettered for it; the model says %d", recorded, len(beyond), s.conflicts)
	}
	produced := invariant.Produced{Valid: append(append([]event.PaymentSucceeded(nil), s.early...), s.payments...)}
	g.check(ctx, "after the storm", produced, payRecs, nil)
	rec := g.reconcileOnce(ctx)
	if rec.Err() != nil {
		t.Fatalf("reconciler after the storm: %v", rec.Err())
	}
	t.Logf("reconciler pass: %s, %d checked, %d drifted%s", rec.Status, rec.Checked, rec.Drifted, findings(rec))
	g.check(ctx, "after the reconciler", produced, payRecs, nil)
}
