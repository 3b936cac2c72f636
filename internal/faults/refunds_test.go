package faults

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// Budgets of the refund storm's merchants.
const (
	stormGrant  = 100_000 // each merchant of the stream: no payment is ever refused
	shortGrant  = 500     // each expiring merchant's grant, gone before its refunds
	laterGrant  = 100     // what the expiring merchants get after it expired
	expiringSet = 5
)

// A refund storm: about 10,000 payments and 3,000 refunds (partial, whole,
// sent again, over-refunded, ahead of their payment, and of payments whose
// grant has expired since), interleaved on two topics, while one worker
// process is SIGKILLed midway; then the refunds group is rewound to the
// start and every refund is delivered again. Every balance is what the
// reference model says (a payment gives back at most its debit, whatever
// the order; an expired grant's units stay gone), no refund is applied
// twice, none is over-refunded, none waits, the dead letters are the
// conflicts (the parts beyond a debit) and nothing else, and the invariants
// (Redis included) hold.
func TestRefundStorm(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(4*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	refundsTopic := g.kafka.Topic(t, 4)
	env := map[string]string{"KAFKA_REFUNDS_TOPIC": refundsTopic}
	rng := mrand.New(mrand.NewPCG(p.seed(), 36))

	stream := stormStream(t, p.seed())
	model := newRefundModel(stream)
	g.grant(ctx, "storm", model.merchants(), stormGrant)

	// Before the storm: the expiring merchants pay from a grant that then
	// expires; their refunds come in the storm, after it.
	expiring, prePay := g.expiringMerchants(ctx, rng)
	procs := []*proc{g.startProc(1, env), g.startProc(2, env)}
	g.produce(ctx, prePay)
	g.drain(ctx, time.Minute)
	g.waitExpired(ctx, expiring)
	g.grant(ctx, "later", expiring, laterGrant)
	model.expiring(expiring, prePay)

	payments, refunds := stormMessages(stream, model.expiredRefunds(rng, prePay), rng)
	t.Logf("storm: %d payment messages, %d refund messages (%d refund ids, %d ahead of their payment, %d of payments whose grant expired)",
		len(payments), len(refunds), len(model.refunds), model.early, model.ofExpired)
	const seconds = 12
	pays := p.startLoad(ctx, payments, len(payments)/seconds)
	refs := g.startLoadTo(ctx, refundsTopic, refunds, len(refunds)/seconds)
	p.await(ctx, between(p.rng, 4*time.Second, 7*time.Second))
	p.killOne(ctx, procs)
	if err := pays.wait(); err != nil {
		t.Fatal(err)
	}
	if err := refs.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("kill", 1)
	g.drain(ctx, 90*time.Second)
	g.drainTopic(ctx, g.group+".refunds", refundsTopic, 90*time.Second)
	for _, p := range procs {
		p.Stop()
	}

	// The refunds once more, every one of them.
	g.rewindToStart(ctx, g.group+".refunds", refundsTopic, 4)
	t.Logf("refunds group rewound: %d refund messages delivered again", len(refunds))
	for _, p := range procs {
		p.Start()
	}
	g.drainTopic(ctx, g.group+".refunds", refundsTopic, 90*time.Second)
	for _, p := range procs {
		p.Stop()
	}
	produced := truthOf(append(prePay, payments...)).produced
	produced.Invalid = g.checkRefunds(ctx, model, refundsTopic)
	g.settle(ctx, produced)
}

// stormStream is the storm's traffic: about 10,000 payments of 40
// merchants and 3,000 refunds of them, with every early refund's payment.
func stormStream(t *testing.T, seed uint64) []workload.Message {
	t.Helper()
	gen, err := workload.New(workload.Config{Seed: seed, Merchants: 40, Skew: workload.Skew{Kind: workload.Hot, Param: 0.2},
		MinAmount: 1, MaxAmount: 9, Duplicates: 0.03, Refunds: 0.23, IDPrefix: "storm-"})
	if err != nil {
		t.Fatal(err)
	}
	var out []workload.Message
	for paid := 0; paid < 10_000; {
		m := gen.Next()
		if m.Topic == workload.Payments && m.Kind == workload.Valid {
			paid++
		}
		out = append(out, m)
	}
	return append(out, gen.Drain()...)
}

// expiringMerchants gives merchants outside the stream a grant that expires
// in a few seconds and returns them and 20 payments each to spend it on.
func (g *rig) expiringMerchants(ctx context.Context, rng *mrand.Rand) ([]string, []kafka.Message) {
	g.t.Helper()
	var merchants []string
	var grants []event.GrantCommand
	var pays []kafka.Message
	prio, exp := 1, time.Now().Add(4*time.Second)
	for i := range expiringSet {
		m := workload.MerchantID(100 + i)
		merchants = append(merchants, m)
		grants = append(grants, event.GrantCommand{GrantID: "short-" + m, MerchantID: m, Amount: shortGrant, Source: "faults", Priority: &prio, ExpiresAt: &exp})
		for k := range 20 {
			e := event.PaymentSucceeded{EventID: fmt.Sprintf("pre-%s-%d", m, k), PaymentID: fmt.Sprintf("pay-pre-%s-%d", m, k), MerchantID: m,
				Amount: 1 + rng.Int64N(9), Source: event.SourcePC, OccurredAt: time.Now().UTC()}
			pays = append(pays, kafka.Message{Key: []byte(m), Value: e.Encode()})
		}
	}
	res, err := g.granter.GrantBatch(ctx, grants)
	if err != nil {
		g.t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			g.t.Fatalf("grant %s: %v", grants[i].GrantID, r.Err)
		}
	}
	return merchants, pays
}

// waitExpired waits until the workers have ended the merchants' short grants.
func (g *rig) waitExpired(ctx context.Context, merchants []string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var active int64
		if err := g.db.DB.WithContext(ctx).Raw("SELECT COUNT(*) FROM quota_grants WHERE grant_id LIKE 'short-%' AND state = 'active'").Scan(&active).Error; err != nil {
			g.t.Fatalf("short grants of %v still active: %v", merchants, err)
		}
		if active == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stormMessages splits the stream by topic and mixes extra refunds into the
// refunds at seeded places.
func stormMessages(stream []workload.Message, extra []kafka.Message, rng *mrand.Rand) (payments, refunds []kafka.Message) {
	for _, m := range stream {
		msg := kafka.Message{Key: m.Key, Value: m.Value}
		if m.Topic == workload.Refunds {
			refunds = append(refunds, msg)
		} else {
			payments = append(payments, msg)
		}
	}
	for _, m := range extra {
		i := rng.IntN(len(refunds) + 1)
		refunds = append(refunds[:i], append([]kafka.Message{m}, refunds[i:]...)...)
	}
	return payments, refunds
}

// drainTopic waits until group has committed every message of topic.
func (g *rig) drainTopic(ctx context.Context, group, topic string, within time.Duration) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last int64
	if err := scenario.WaitDrained(ctx, g.client(), group, topic, func(lag int64) { last = lag }); err != nil {
		g.t.Fatalf("%s not drained within %v (lag %d): %v", topic, within, last, err)
	}
}

// rewindToStart commits offset 0 of every partition of topic for the
// stopped group: everything is delivered again.
func (g *rig) rewindToStart(ctx context.Context, group, topic string, partitions int) {
	g.t.Helper()
	var commits []kafka.OffsetCommit
	for p := range partitions {
		commits = append(commits, kafka.OffsetCommit{Partition: p, Offset: 0})
	}
	resp, err := g.client().OffsetCommit(ctx, &kafka.OffsetCommitRequest{Addr: kafka.TCP(g.kafka.Brokers[0]), GroupID: group,
		GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: commits}})
	if err != nil {
		g.t.Fatal(err)
	}
	for _, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				g.t.Fatalf("rewind %s/%d: %v", topic, p.Partition, p.Error)
			}
		}
	}
}

// refundModel is the reference: what each payment debited, what its
// refunds ask for in total (each refund id once), and so what comes back.
type refundModel struct {
	debit   map[string]int64  // payment event id: amount (every payment is debited in full)
	owner   map[string]string // payment event id: merchant
	asked   map[string]int64  // payment event id: the sum of its refunds' amounts
	refunds map[string]event.RefundCommand
	// ofExpired are the payment event ids whose grant expired before their
	// refunds: nothing of them comes back.
	expiredOf map[string]bool
	balance   map[string]int64 // merchant: before refunds
	early     int              // refunds sent before their payment
	ofExpired int
}

func newRefundModel(stream []workload.Message) *refundModel {
	m := &refundModel{debit: map[string]int64{}, owner: map[string]string{}, asked: map[string]int64{},
		refunds: map[string]event.RefundCommand{}, expiredOf: map[string]bool{}, balance: map[string]int64{}}
	for _, msg := range stream {
		switch {
		case msg.Topic == workload.Payments && msg.Kind == workload.Valid:
			e := msg.Event
			m.debit[e.EventID], m.owner[e.EventID] = e.Amount, e.MerchantID
			if _, ok := m.balance[e.MerchantID]; !ok {
				m.balance[e.MerchantID] = stormGrant
			}
			m.balance[e.MerchantID] -= e.Amount
		case msg.Topic == workload.Refunds && msg.Kind == workload.Valid:
			m.refund(msg.Refund)
			if msg.RefundKind == workload.Early {
				m.early++
			}
		}
	}
	return m
}

func (m *refundModel) refund(r event.RefundCommand) {
	m.refunds[r.RefundID] = r
	m.asked[r.EventID] += r.Amount
}

// merchants are those of the stream.
func (m *refundModel) merchants() []string {
	var out []string
	for id := range m.balance {
		out = append(out, id)
	}
	return out
}

// expiring adds the merchants whose grant expired: after it, what they got later.
func (m *refundModel) expiring(merchants []string, pays []kafka.Message) {
	for _, id := range merchants {
		m.balance[id] = laterGrant
	}
	for _, msg := range pays {
		e, _ := event.Decode(msg.Key, msg.Value) // made by this test: valid
		m.debit[e.EventID], m.owner[e.EventID], m.expiredOf[e.EventID] = e.Amount, e.MerchantID, true
	}
}

// expiredRefunds makes refunds of most of the payments whose grant expired:
// whole, partial, beyond the debit, some sent twice.
func (m *refundModel) expiredRefunds(rng *mrand.Rand, pays []kafka.Message) []kafka.Message {
	var out []kafka.Message
	for k, msg := range pays {
		if rng.IntN(10) < 3 {
			continue
		}
		e, _ := event.Decode(msg.Key, msg.Value)
		amount := []int64{e.Amount, max(1, e.Amount/2), e.Amount + 3}[rng.IntN(3)]
		r := event.RefundCommand{RefundID: fmt.Sprintf("ref-pre-%d", k), EventID: e.EventID, MerchantID: e.MerchantID, Amount: amount,
			Reason: event.RefundReasonChargeback, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
		m.refund(r)
		m.ofExpired++
		rm := kafka.Message{Key: []byte(r.MerchantID), Value: r.Encode()}
		out = append(out, rm)
		if rng.IntN(10) == 0 {
			out = append(out, rm)
		}
	}
	return out
}

// want is each merchant's balance by the model: a payment gives back the
// least of its debit and what its refunds ask, unless its grant expired.
func (m *refundModel) want() map[string]int64 {
	out := make(map[string]int64, len(m.balance))
	for id, b := range m.balance {
		out[id] = b
	}
	for ev, asked := range m.asked {
		if !m.expiredOf[ev] {
			out[m.owner[ev]] += min(asked, m.debit[ev])
		}
	}
	return out
}

// checkRefunds holds the end state against the model, and returns how many
// refund messages were dead-lettered (by provenance), all conflicts.
func (g *rig) checkRefunds(ctx context.Context, model *refundModel, refundsTopic string) int {
	g.t.Helper()
	db := g.db.DB.WithContext(ctx)
	var balances []struct {
		MerchantID string
		Balance    int64
	}
	if err := db.Raw("SELECT merchant_id, credited - debited AS balance FROM merchant_balance").Scan(&balances).Error; err != nil {
		g.t.Fatal(err)
	}
	want := model.want()
	got := map[string]int64{}
	for _, b := range balances {
		got[b.MerchantID] = b.Balance
	}
	for id, w := range want {
		if got[id] != w {
			g.t.Errorf("merchant %s: balance %d, the model says %d", id, got[id], w)
		}
	}

	var recs []struct {
		RefundID, EventID, Note          string
		State                            ledger.RefundState
		Taken, Returned, Expired, Beyond int64
		Waited                           bool // pending first, applied with its payment
	}
	if err := db.Raw("SELECT refund_id, event_id, note, state, taken, returned, expired, beyond, settled_at > created_at AS waited FROM quota_refunds").Scan(&recs).Error; err != nil {
		g.t.Fatal(err)
	}
	taken := map[string]int64{}
	beyond := map[string]bool{} // refund id: dead-lettered (else the transaction of its payment wrote its note)
	states := map[ledger.RefundState]int{}
	for _, r := range recs {
		states[r.State]++
		taken[r.EventID] += r.Taken
		switch {
		case r.Beyond > 0 && r.Waited && r.Note == "":
			g.t.Errorf("refund %s waited for its payment and went beyond its debit: no note says so", r.RefundID)
		case r.Beyond > 0:
			beyond[r.RefundID] = !r.Waited
		}
		if _, ok := model.refunds[r.RefundID]; !ok {
			g.t.Errorf("refund %s recorded, never sent", r.RefundID)
		}
		if model.expiredOf[r.EventID] && (r.Returned != 0 || r.Expired != r.Taken) {
			g.t.Errorf("refund %s of a payment whose grant expired: returned %d, expired %d of %d taken", r.RefundID, r.Returned, r.Expired, r.Taken)
		}
	}
	g.t.Logf("refunds recorded: %v; %d with a part beyond the debit", states, len(beyond))
	if len(recs) != len(model.refunds) || states[ledger.RefundApplied] == 0 || states[ledger.RefundPending] != 0 || states[ledger.RefundCancelled] != 0 {
		g.t.Errorf("%d refunds recorded (%v), %d sent: want each once, none waiting", len(recs), states, len(model.refunds))
	}
	for ev, n := range taken {
		if n > model.debit[ev] {
			g.t.Errorf("payment %s: refunds took %d of a debit of %d", ev, n, model.debit[ev])
		}
		if !model.expiredOf[ev] && n != min(model.asked[ev], model.debit[ev]) {
			g.t.Errorf("payment %s: refunds took %d, the model says %d", ev, n, min(model.asked[ev], model.debit[ev]))
		}
	}
	var twice int64
	if err := db.Raw("SELECT COUNT(*) FROM (SELECT event_id FROM quota_ledger WHERE kind = 'refund' GROUP BY event_id HAVING COUNT(*) > 1) t").Scan(&twice).Error; err != nil || twice != 0 {
		g.t.Errorf("%d refund rows written more than once (%v)", twice, err)
	}

	// Dead letters: the conflicts (each refund with a part beyond its debit
	// that did not wait: a waiting one's conflict is found by the payment's
	// transaction, with no refund message to dead-letter), and nothing else.
	dead := map[string]bool{}
	provenances := map[string]bool{}
	for _, rec := range g.readDLQ(ctx) {
		r, err := event.DecodeRefund(rec.Key, rec.Value)
		if _, ok := beyond[r.RefundID]; rec.OriginalTopic != refundsTopic || rec.Class != dlq.ClassConflict || err != nil || !ok {
			g.t.Errorf("dead letter %s (%s: %s) is not a refund's conflict", rec.Provenance(), rec.Class, rec.Message)
			continue
		}
		dead[r.RefundID], provenances[rec.Provenance()] = true, true
	}
	for id, mustDie := range beyond {
		if mustDie && !dead[id] {
			g.t.Errorf("refund %s went beyond its debit, and no conflict was dead-lettered", id)
		}
	}
	return len(provenances)
}
