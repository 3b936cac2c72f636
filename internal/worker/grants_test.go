package worker

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
)

func grantMsg(id, merchant string, amount int64) kafka.Message {
	return kafka.Message{Key: []byte(merchant), Value: event.GrantCommand{GrantID: id, MerchantID: merchant, Amount: amount, Source: "plans"}.Encode()}
}

func paymentMsg(id, merchant string, amount int64) kafka.Message {
	e := event.PaymentSucceeded{EventID: id, PaymentID: "pay-" + id, MerchantID: merchant, Amount: amount,
		Source: event.SourcePC, OccurredAt: time.Now().UTC()}
	return kafka.Message{Key: []byte(merchant), Value: e.Encode()}
}

// grantRecords returns the DLQ records of the grants topic, one per provenance.
func (g *rig) grantRecords(ctx context.Context) map[string]dlq.Record {
	out := map[string]dlq.Record{}
	for _, r := range g.dlqRecords(ctx) {
		if r.OriginalTopic == g.grants {
			out[r.Provenance()] = r
		}
	}
	return out
}

// A grant command published 3 times and once with another amount, and
// invalid commands: one credit row, one conflict and one invalid record per
// bad command in the DLQ, each with its reason, and the balance right in MySQL
// and, once a payment loads it again, in Redis.
func TestGrantsTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	w := g.start(1, Options{NoHTTP: true})
	grantAll(t, w.Worker, []string{"m-a"}, 10) // billingctl's path: the same write path
	g.produce(ctx, []kafka.Message{paymentMsg("p1", "m-a", 1)})
	g.drain(ctx) // Redis holds m-a at 9

	raw := func(v string) kafka.Message { return kafka.Message{Key: []byte("m-a"), Value: []byte(v)} }
	invalid := map[string]string{ // value -> a word of its DLQ reason
		`{"grant_id":`: "not a JSON object",
		`{"grant_id":"g2","merchant_id":"m-a","amount":0,"source":"plans"}`:                "outside 1..10^12",
		`{"grant_id":"g3","merchant_id":"m-a","amount":5}`:                                 "invalid source: missing",
		`{"grant_id":"g4","merchant_id":"m-a","amount":5,"source":"plans","priority":101}`: "not an integer in 0..100",
		`{"grant_id":"g5","merchant_id":"m-b","amount":5,"source":"plans"}`:                "does not match merchant_id",
	}
	msgs := []kafka.Message{grantMsg("g1", "m-a", 100), grantMsg("g1", "m-a", 100), grantMsg("g1", "m-a", 50), grantMsg("g1", "m-a", 100),
		raw(`{"grant_id":"g6","merchant_id":"m-a","amount":5,"source":"plans","expires_at":"2099-01-01T00:00:00Z","priority":1,"rollover_max":5}`)}
	for v := range invalid {
		msgs = append(msgs, raw(v))
	}
	g.produceTo(ctx, g.grants, msgs)
	g.drainGrants(ctx)

	var rows int64
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE event_id = 'g1' AND kind = 'credit' AND amount = 100 AND source = 'plans'").Scan(&rows)
	if rows != 1 {
		t.Errorf("credit rows of g1 = %d, want 1", rows)
	}
	// The reply: one quota.granted in the outbox, written with the credit row.
	var granted []string
	g.db.DB.Raw("SELECT id FROM quota_outbox WHERE caused_by = 'g1' AND type = 'quota.granted'").Scan(&granted)
	if len(granted) != 1 {
		t.Errorf("quota.granted outbox rows of g1 = %v, want one", granted)
	}
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE event_id IN ('g2', 'g3', 'g4', 'g5')").Scan(&rows)
	if rows != 0 {
		t.Errorf("invalid commands left %d ledger rows", rows)
	}
	records := g.grantRecords(ctx)
	conflicts := 0
	for _, r := range records {
		if r.Group != g.group+".grants" {
			t.Errorf("record of group %q, want %q", r.Group, g.group+".grants")
		}
		switch r.Class {
		case dlq.ClassConflict:
			conflicts++
			if !strings.Contains(string(r.Value), `"amount":50`) || !strings.Contains(r.Message, "grant g1 is recorded as credit of 100") {
				t.Errorf("conflict record %s: %s", r.Value, r.Message)
			}
		case dlq.ClassInvalid:
			if want, ok := invalid[string(r.Value)]; !ok || !strings.Contains(r.Message, want) {
				t.Errorf("invalid record %s: reason %q, want %q", r.Value, r.Message, want)
			}
		default:
			t.Errorf("record of class %s: %s", r.Class, r.Message)
		}
	}
	if conflicts != 1 || len(records) != 1+len(invalid) {
		t.Errorf("DLQ: %d records, %d conflicts; want %d and 1", len(records), conflicts, 1+len(invalid))
	}

	g.produce(ctx, []kafka.Message{paymentMsg("p2", "m-a", 1)})
	g.drain(ctx)
	v, err := w.path.Deductor.Show(ctx, "m-a")
	if err != nil {
		t.Fatal(err)
	}
	if v.Credited != 115 || v.Debited != 2 || !v.Cached || v.Remain != 113 || len(v.Pending) != 0 {
		t.Errorf("m-a after the grants: %+v; want credited 115, debited 2, Redis 113", v)
	}
	// g6 expires and comes first (priority 1): it paid p2.
	var paidBy string
	g.db.DB.Raw("SELECT grant_id FROM quota_ledger WHERE event_id = 'p2'").Scan(&paidBy)
	if paidBy != "g6" {
		t.Errorf("p2 paid by %q, want g6", paidBy)
	}
}

// Grants interleaved with payments for the same merchants, and the worker
// replaced mid-stream: every grant credits once, every payment has one row,
// balances equal the ledger and Redis equals MySQL, nothing overdrawn.
func TestGrantsInterleavedWithPaymentsAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	first := g.start(1, Options{NoHTTP: true})
	merchants := []string{"m-0", "m-1", "m-2", "m-3"}
	var produced invariant.Produced
	credits := map[string]int64{}
	round := func(r int) {
		var grants, pays []kafka.Message
		for i, m := range merchants {
			grants = append(grants, grantMsg(fmt.Sprintf("g-%d-%s", r, m), m, 3))
			credits[m] += 3
			for k := range 4 {
				id := fmt.Sprintf("p-%d-%d-%s", r, k, m)
				msg := paymentMsg(id, m, int64(1+(i+k)%2))
				pays = append(pays, msg)
				e, _ := event.Decode(msg.Key, msg.Value)
				produced.Valid = append(produced.Valid, e)
			}
		}
		g.produceTo(ctx, g.grants, append(grants, grants...)) // each published twice
		g.produce(ctx, pays)
	}
	for r := range 10 {
		round(r)
	}
	second := g.start(2, Options{NoHTTP: true})
	first.stop(t) // mid-stream: the second takes over both groups' partitions
	for r := 10; r < 20; r++ {
		round(r)
	}
	g.drain(ctx)
	g.drainGrants(ctx)

	for m, want := range credits {
		var rows, sum int64
		g.db.DB.Raw("SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM quota_ledger WHERE merchant_id = ? AND kind = 'credit'", m).Row().Scan(&rows, &sum)
		if rows != 20 || sum != want {
			t.Errorf("%s: %d credit rows summing to %d, want 20 and %d", m, rows, sum, want)
		}
	}
	// Settle Redis: a last payment per merchant loads every hash the grants dropped.
	var last []kafka.Message
	for _, m := range merchants {
		msg := paymentMsg("last-"+m, m, 1)
		last = append(last, msg)
		e, _ := event.Decode(msg.Key, msg.Value)
		produced.Valid = append(produced.Valid, e)
	}
	g.produce(ctx, last)
	g.drain(ctx)
	var payDLQ []dlq.Record
	for _, r := range g.dlqRecords(ctx) {
		if r.OriginalTopic == g.topic {
			payDLQ = append(payDLQ, r)
		}
	}
	rep := g.check(ctx, second.Worker, produced, payDLQ)
	if !rep.OK() {
		t.Fatalf("invariants broken:\n%s", rep)
	}
	if n := len(g.grantRecords(ctx)); n != 0 {
		t.Errorf("%d grant commands dead-lettered; none should be", n)
	}
}

// A worker started before its grants topic exists: payments flow and it is
// ready meanwhile; once the topic is created, its commands are applied.
func TestGrantsTopicCreatedLater(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 1)
	g.grants += "-later"
	g.env["KAFKA_GRANTS_TOPIC"] = g.grants
	reg := prometheus.NewRegistry()
	w := g.start(1, Options{Registry: reg})
	grantAll(t, w.Worker, []string{"m-a"}, 10)
	g.produce(ctx, []kafka.Message{paymentMsg("p1", "m-a", 1)})
	g.drain(ctx)
	waitReadyz(t, w.Worker, http.StatusOK, `"kafka_grants":"ok"`)
	// Joined without its topic, the grants member would rejoin in a loop.
	if n := grantGenerations(t, reg, g.grants); n != 0 {
		t.Errorf("%v grants generations before the topic exists, want 0", n)
	}

	if err := g.kafka.CreateTopic(g.grants, 1); err != nil {
		t.Fatal(err)
	}
	// A transport of its own: the rig's caches metadata from before the topic.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	pw := &kafka.Writer{Addr: kafka.TCP(g.kafka.Brokers...), Topic: g.grants, Transport: tr, RequiredAcks: kafka.RequireAll}
	if err := pw.WriteMessages(ctx, grantMsg("g1", "m-a", 5)); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	g.drainGrants(ctx)
	if v, err := w.path.Deductor.Show(ctx, "m-a"); err != nil || v.Credited != 15 || v.Debited != 1 {
		t.Errorf("m-a = %+v, %v; want credited 15, debited 1", v, err)
	}
}

// grantGenerations reads billing_consumer_generations_total{topic}.
func grantGenerations(t *testing.T, reg *prometheus.Registry, topic string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == "billing_consumer_generations_total" && l.GetName() == "topic" && l.GetValue() == topic {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
