package plan

import (
	"testing"
	"time"
)

func TestParseEvery(t *testing.T) {
	tests := []struct {
		in   string
		want Every
		ok   bool
	}{
		{"1mo", Every{Months: 1}, true}, {"12mo", Every{Months: 12}, true}, {"7d", Every{Duration: 7 * 24 * time.Hour}, true},
		{"90s", Every{Duration: 90 * time.Second}, true}, {"0mo", Every{}, false}, {"mo", Every{}, false},
		{"500ms", Every{}, false}, {"weekly", Every{}, false},
	}
	for _, tt := range tests {
		got, err := ParseEvery(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseEvery(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestPeriod(t *testing.T) {
	anchor := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	monthly := Plan{Every: Every{Months: 1}, Anchor: anchor}
	hourly := Plan{Every: Every{Duration: time.Hour}, Anchor: anchor}
	monthEnd := Plan{Every: Every{Months: 1}, Anchor: time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)}
	d := func(m time.Month, day, h int) time.Time { return time.Date(2026, m, day, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name       string
		p          Plan
		now        time.Time
		start, end time.Time
		ok         bool
	}{
		{"before the anchor", monthly, d(1, 14, 0), time.Time{}, time.Time{}, false},
		{"at the anchor", monthly, anchor, anchor, d(2, 15, 0), true},
		{"inside the first month", monthly, d(2, 1, 0), anchor, d(2, 15, 0), true},
		{"exactly at a period start", monthly, d(2, 15, 0), d(2, 15, 0), d(3, 15, 0), true},
		{"months later (missed periods are skipped)", monthly, d(7, 20, 0), d(7, 15, 0), d(8, 15, 0), true},
		{"hours later", hourly, d(1, 15, 5).Add(30 * time.Minute), d(1, 15, 5), d(1, 15, 6), true},
		{"quarterly", Plan{Every: Every{Months: 3}, Anchor: anchor}, d(5, 1, 0), d(4, 15, 0), d(7, 15, 0), true},
		{"anchor on the 31st, early March", monthEnd, d(3, 2, 0), d(2, 28, 0), d(3, 31, 0), true},
		{"anchor on the 31st, end of March", monthEnd, d(3, 31, 0), d(3, 31, 0), d(4, 30, 0), true},
		{"anchor on the 31st, in May", monthEnd, d(5, 30, 0), d(4, 30, 0), d(5, 31, 0), true},
		{"anchor on the 31st, at its second year", monthEnd, time.Date(2027, 2, 28, 0, 0, 0, 0, time.UTC),
			time.Date(2027, 2, 28, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 31, 0, 0, 0, 0, time.UTC), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end, ok := tt.p.Period(tt.now)
			if ok != tt.ok || !start.Equal(tt.start) || !end.Equal(tt.end) {
				t.Errorf("Period = %v, %v, %v; want %v, %v, %v", start, end, ok, tt.start, tt.end, tt.ok)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)
	p := Plan{MerchantID: "m-42", Amount: 100000, RolloverMax: 10000, Priority: 5}
	g := Command(p, start, end)
	if g.GrantID != "plan:m-42:1796083200" || g.Amount != 100000 || *g.ExpiresAt != end || *g.StartsAt != start ||
		g.PriorityOr() != 5 || g.RolloverMax != 10000 {
		t.Errorf("Command = %+v", g)
	}
	if Command(p, start, end).GrantID != g.GrantID {
		t.Error("the grant id of a period is not stable")
	}
}
