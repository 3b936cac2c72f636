package workload

import (
	"bytes"
	"context"
	"testing"

	"github.com/quotaflow/billing/internal/event"
)

// The truth a refund message carries (what it takes, what is beyond) is
// what an independent replay of the stream says, in stream order: each
// refund id once, refunds of a payment adding up to at most its amount.
// Every kind is made near its weight; an early refund's payment follows it
// at least EarlyLead messages later (or when the stream is drained); a re-sent refund is its original.
func TestRefundsMixAndTruth(t *testing.T) {
	const n = 30_000
	cfg := Config{Seed: 5, Merchants: 40, Duplicates: 0.02, Malformed: 0.01, Refunds: 0.1, IDPrefix: "rf-"}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = g.Next()
	}
	msgs = append(msgs, g.Drain()...)
	payments := map[string]event.PaymentSucceeded{}
	paidAt := map[string]int{}
	for _, m := range msgs {
		if m.Topic == Payments && m.Kind == Valid {
			if _, ok := payments[m.Event.EventID]; ok {
				t.Fatalf("payment %s emitted twice as new", m.Event.EventID)
			}
			payments[m.Event.EventID], paidAt[m.Event.EventID] = m.Event, m.Seq
		}
	}
	taken := map[string]int64{}
	seen := map[string]Message{}
	kinds := map[RefundKind]int{}
	var refunds, resent, held int
	for _, m := range msgs {
		if m.Topic != Refunds {
			continue
		}
		r := m.Refund
		if !bytes.Equal(m.Key, []byte(r.MerchantID)) || !bytes.Equal(m.Value, r.Encode()) {
			t.Fatalf("refund %d: key %s, value %s: not its refund %+v", m.Seq, m.Key, m.Value, r)
		}
		if m.Kind == Duplicate {
			resent++
			if o, ok := seen[r.RefundID]; !ok || !bytes.Equal(o.Value, m.Value) || o.Seq != m.DuplicateOf {
				t.Fatalf("re-sent refund %d is not its original %d", m.Seq, m.DuplicateOf)
			}
			continue
		}
		refunds++
		if _, ok := seen[r.RefundID]; ok {
			t.Fatalf("refund id %s made twice", r.RefundID)
		}
		seen[r.RefundID] = m
		kinds[m.RefundKind]++
		p, ok := payments[r.EventID]
		if !ok || p.MerchantID != r.MerchantID || r.Amount < 1 {
			t.Fatalf("refund %+v: of no payment of its merchant (%+v)", r, p)
		}
		if early := paidAt[r.EventID] > m.Seq; early != (m.RefundKind == Early) || early && paidAt[r.EventID] < n && paidAt[r.EventID]-m.Seq < EarlyLead {
			t.Fatalf("refund %d (%v) of a payment at %d", m.Seq, m.RefundKind, paidAt[r.EventID])
		}
		left := p.Amount - taken[r.EventID]
		want := min(left, r.Amount)
		if m.Taken != want || m.Beyond != r.Amount-want {
			t.Fatalf("refund %d (%v) of %d with %d left: takes %d beyond %d, want %d", m.Seq, m.RefundKind, r.Amount, left, m.Taken, m.Beyond, want)
		}
		if (m.RefundKind == Over) != (m.Beyond > 0) || m.RefundKind == Whole && m.Taken != left || m.RefundKind == Partial && left > 1 && m.Taken >= left {
			t.Fatalf("refund %d is no %v: %d of %d left", m.Seq, m.RefundKind, r.Amount, left)
		}
		taken[r.EventID] += want
		if m.RefundKind == Early && paidAt[r.EventID] < n {
			held++
		}
	}
	checkShare(t, "refunds", refunds+resent, n-held, 0.1) // of the messages drawn: an early refund's payment is not
	mix := DefaultRefundMix
	for k, w := range map[RefundKind]float64{Partial: mix.Partial, Whole: mix.Whole, Over: mix.Over, Early: mix.Early} {
		if kinds[k] == 0 || float64(kinds[k]) < 0.5*w*float64(refunds+resent) {
			t.Errorf("%d %v refunds of %d, want about %.0f%%", kinds[k], k, refunds+resent, 100*w)
		}
	}
	if resent == 0 {
		t.Error("no refund sent again")
	}
	if s := Summarize(msgs); s.Refunds != refunds || s.RefundDuplicates != resent || s.Conflicts != kinds[Over] {
		t.Errorf("summary: %d refunds, %d again, %d conflicts; want %d, %d, %d", s.Refunds, s.RefundDuplicates, s.Conflicts, refunds, resent, kinds[Over])
	}
	if g.Drain() != nil {
		t.Error("drained twice")
	}
}

// A stream without refunds is the stream it always was; with them it is
// still one per seed.
func TestRefundsKeepTheStreamBySeed(t *testing.T) {
	cfg := Config{Seed: 9, Merchants: 10, Duplicates: 0.1}
	a := generate(t, cfg, 3000)
	cfg.RefundMix = RefundMix{Whole: 1}
	if b := generate(t, cfg, 3000); !sameStream(a, b) {
		t.Fatal("a refund mix changes a stream without refunds")
	}
	cfg.Refunds = 0.2
	if c, d := generate(t, cfg, 3000), generate(t, cfg, 3000); !sameStream(c, d) || sameStream(a, c) {
		t.Fatal("refunds make a seed's stream differ between runs, or add none")
	}
}

func sameStream(a, b []Message) bool {
	for i := range a {
		if a[i].Topic != b[i].Topic || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return len(a) == len(b)
}

// Refunds go to the refunds writer, after the payments of their hand-over;
// a stream with refunds and no refunds writer is refused before it starts.
func TestProduceRoutesRefunds(t *testing.T) {
	cfg := Config{Seed: 3, Merchants: 5, Refunds: 0.3}
	want := generate(t, cfg, 2500)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ProduceOnSchedule(context.Background(), Writers{Payments: &clockWriter{}}, g, 10, true, nil); err == nil {
		t.Fatal("no refunds writer: no error")
	}
	var pw, rw clockWriter
	st, err := ProduceOnSchedule(context.Background(), Writers{Payments: &pw, Refunds: &rw}, g, 2500, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wp, wr [][]byte
	for _, m := range want {
		if m.Topic == Refunds {
			wr = append(wr, m.Value)
		} else {
			wp = append(wp, m.Value)
		}
	}
	if !equalValues(pw.values, wp) || !equalValues(rw.values, wr) || st.Summary.Refunds+st.Summary.RefundDuplicates != len(wr) {
		t.Fatalf("%d payments and %d refunds written, want %d and %d", len(pw.values), len(rw.values), len(wp), len(wr))
	}
}

func equalValues(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
