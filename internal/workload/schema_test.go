package workload

import (
	"testing"

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
