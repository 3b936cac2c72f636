package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
)

func refundMsg(id, payment, merchant string, amount int64) kafka.Message {
	r := event.RefundCommand{RefundID: id, EventID: payment, MerchantID: merchant, Amount: amount,
		Reason: event.RefundReasonRefund, OccurredAt: time.Now().UTC()}
	return kafka.Message{Key: []byte(merchant), Value: r.Encode()}
}

// shape is what both orders must agree on for a merchant: its balance row,
// its ledger's totals by kind, its grants' remaining and its balance events
// (type, before, after), in order.
func (g *rig) shape(merchant string) string {
	g.t.Helper()
	var parts []string
	for _, q := range []string{
		"SELECT CONCAT(credited, '/', debited, '/', seq) FROM merchant_balance WHERE merchant_id = ?",
		"SELECT CONCAT(kind, ':', SUM(amount), ':', COUNT(*)) FROM quota_ledger WHERE merchant_id = ? GROUP BY kind ORDER BY kind",
		"SELECT CONCAT(SUBSTRING_INDEX(grant_id, '.', -1), ':', remaining, ':', state) FROM quota_grants WHERE merchant_id = ? ORDER BY grant_id",
		"SELECT CONCAT(type, ':', balance_before, ':', balance_after) FROM quota_outbox WHERE merchant_id = ? ORDER BY seq",
	} {
		var got []string
		if err := g.db.DB.Raw(q, merchant).Scan(&got).Error; err != nil {
			g.t.Fatal(err)
		}
		parts = append(parts, strings.Join(got, ","))
	}
	return strings.Join(parts, " | ")
}

// TestRefundsTopicInEitherOrder: through the worker, refunds of a payment
// published after it and refunds published before it (they wait) end in the
// same balance, ledger totals, grants and balance events; a redelivered
// refund has no effect, one with other terms and an over-refund are
// dead-lettered as conflicts naming what is recorded; Redis then agrees.
func TestRefundsTopicInEitherOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	reg := prometheus.NewRegistry()
	w := g.start(1, Options{NoHTTP: true, Registry: reg})
	for _, m := range []string{"m-after", "m-before"} {
		g.produceTo(ctx, g.grants, []kafka.Message{grantMsg(m+".first", m, 10), grantMsg(m+".second", m, 100)})
	}
	g.drainGrants(ctx)
	refunds := func(m string) []kafka.Message {
		return []kafka.Message{refundMsg(m+"-r1", m+"-p", m, 4), refundMsg(m+"-r1", m+"-p", m, 4), refundMsg(m+"-r2", m+"-p", m, 3)}
	}
	// Payment first.
	g.produce(ctx, []kafka.Message{paymentMsg("m-after-p", "m-after", 15)})
	g.drain(ctx)
	g.produceTo(ctx, g.refunds, refunds("m-after"))
	g.drainRefunds(ctx)
	// Refunds first: they wait, then apply with the payment.
	g.produceTo(ctx, g.refunds, refunds("m-before"))
	g.drainRefunds(ctx)
	var pending int64
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_refunds WHERE state = 'pending'").Scan(&pending)
	if pending != 2 {
		t.Errorf("%d refunds pending before their payment, want 2", pending)
	}
	if n := gauge(t, reg, "billing_refunds_pending"); n != 2 {
		t.Errorf("billing_refunds_pending = %v, want 2", n)
	}
	g.produce(ctx, []kafka.Message{paymentMsg("m-before-p", "m-before", 15)})
	g.drain(ctx)

	after, before := g.shape("m-after"), g.shape("m-before")
	if after != before {
		t.Errorf("the two orders differ:\npayment first %s\nrefunds first %s", after, before)
	}
	if !strings.Contains(after, "refund:7:2") || !strings.Contains(after, "quota.refunded") {
		t.Errorf("shape %s: want two refund rows of 7 and quota.refunded events", after)
	}

	// Conflicts: other terms, and beyond the debit (8 left of 15).
	g.produceTo(ctx, g.refunds, []kafka.Message{refundMsg("m-after-r1", "m-after-p", "m-after", 5), refundMsg("m-after-r3", "m-after-p", "m-after", 10)})
	g.drainRefunds(ctx)
	var conflicts []string
	for _, r := range g.dlqRecords(ctx) {
		if r.OriginalTopic != g.refunds {
			continue
		}
		if r.Class != dlq.ClassConflict || r.Group != g.group+".refunds" {
			t.Errorf("record of class %s, group %s: %s", r.Class, r.Group, r.Message)
		}
		conflicts = append(conflicts, r.Message)
	}
	msgs := strings.Join(conflicts, "\n")
	if len(conflicts) != 2 || !strings.Contains(msgs, "refund m-after-r1 is recorded as refund of 4 of payment m-after-p") ||
		!strings.Contains(msgs, "exceeds what payment m-after-p had left by 2") {
		t.Errorf("conflicts in the DLQ:\n%s", msgs)
	}
	// Both merchants' caches were dropped: the next payment hydrates.
	pays := []kafka.Message{paymentMsg("m-after-p2", "m-after", 1), paymentMsg("m-before-p2", "m-before", 1)}
	g.produce(ctx, pays)
	g.drain(ctx)
	var produced invariant.Produced
	for _, m := range []kafka.Message{paymentMsg("m-after-p", "m-after", 15), paymentMsg("m-before-p", "m-before", 15), pays[0], pays[1]} {
		e, err := event.Decode(m.Key, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		produced.Valid = append(produced.Valid, e)
	}
	produced.Invalid = 2 // the two conflicting refunds
	if rep := g.check(ctx, w.Worker, produced, g.dlqRecords(ctx)); !rep.OK() || rep.Checked["refunds applied"] != 5 {
		t.Errorf("invariants:\n%s", rep)
	}
	for m, want := range map[string]int64{"m-after": 110 - 15 + 15 - 1, "m-before": 110 - 15 + 7 - 1} {
		v, err := w.path.Deductor.Show(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if v.Credited-v.Debited != want || !v.Cached || v.Remain != want {
			t.Errorf("%s: %+v; want balance %d in MySQL and Redis", m, v, want)
		}
	}
}

// gauge is the value of an unlabelled gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
