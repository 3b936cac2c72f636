package workload

import (
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/schemas"
)

// What billing-sim produces holds against the topic's schema: every valid
// message and duplicate validates, every malformed one is refused, but for a
// key that does not match (the key is not in the value).
func TestMessagesHoldAgainstTheSchema(t *testing.T) {
	s := schemas.MustCompile(schemas.PaymentSucceeded)
	flaws := map[string]int{}
	for _, m := range generate(t, Config{Seed: 12, Merchants: 20, Duplicates: 0.1, Malformed: 0.3, IDPrefix: "run2-"}, 3_000) {
		err := s.Validate(m.Value)
		switch refused := m.Kind == Malformed && m.Flaw != FlawKeyMismatch; {
		case refused && err == nil:
			t.Fatalf("malformed message %d (%s) validates: %s", m.Seq, m.Flaw, m.Value)
		case !refused && err != nil:
			t.Fatalf("message %d (kind %d) breaks the schema: %v: %s", m.Seq, m.Kind, err, m.Value)
		}
		flaws[m.Flaw]++
	}
	for _, f := range Flaws() {
		if flaws[f] == 0 {
			t.Errorf("flaw %s never generated", f)
		}
	}
}

// Every refund billing-sim produces, new or sent again, holds against the
// refunds topic's schema and the worker's decoder.
func TestRefundsHoldAgainstTheSchema(t *testing.T) {
	s := schemas.MustCompile(schemas.PaymentRefunded)
	refunds := 0
	for _, m := range generate(t, Config{Seed: 13, Merchants: 20, Refunds: 0.5, IDPrefix: "run3-"}, 3_000) {
		if m.Topic != Refunds {
			continue
		}
		refunds++
		if err := s.Validate(m.Value); err != nil {
			t.Fatalf("refund %d breaks the schema: %v: %s", m.Seq, err, m.Value)
		}
		if r, err := event.DecodeRefund(m.Key, m.Value); err != nil || r != m.Refund {
			t.Fatalf("refund %d: the worker decodes %+v, %v: want %+v", m.Seq, r, err, m.Refund)
		}
	}
	if refunds == 0 {
		t.Fatal("no refunds")
	}
}
