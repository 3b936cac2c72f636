package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/schemas"
)

// A period's grant command is one the grants topic would take but for its
// id: the scheduler issues it to the worker's own grant path, never through
// the topic, under the prefix plan: that the contract reserves for it.
func TestCommandHoldsAgainstTheGrantsSchema(t *testing.T) {
	s := schemas.MustCompile(schemas.QuotaGrants)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []Plan{
		{MerchantID: "m-42", Amount: 100000, RolloverMax: 10000, Priority: 5, Every: Every{Months: 1}},
		{MerchantID: "m-43", Amount: 1, Priority: 0, Every: Every{Duration: 90 * time.Second}},
		{MerchantID: strings.Repeat("m", 64), Amount: event.MaxAmount, RolloverMax: event.MaxAmount, Priority: 100, Every: Every{Months: 12}},
	} {
		p.Anchor = start
		_, end, _ := p.Period(start)
		g := Command(p, start, end)
		if err := s.Validate(g.Encode()); err == nil || !strings.HasPrefix(g.GrantID, "plan:") {
			t.Errorf("%s: the schema takes the reserved id %s", g.Encode(), g.GrantID)
		}
		g.GrantID = strings.TrimPrefix(g.GrantID, "plan:")
		if err := s.Validate(g.Encode()); err != nil {
			t.Errorf("%s: %v", g.Encode(), err)
		}
		if _, err := event.DecodeGrant([]byte(g.MerchantID), g.Encode()); err != nil {
			t.Errorf("%s: %v", g.Encode(), err)
		}
	}
}
