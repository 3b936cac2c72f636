package quotaevent

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCrossed(t *testing.T) {
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	reject := Levels{Alerts: Alerts{Units: 1000, Percent: 10}}
	tests := []struct {
		name string
		c    Change
		lv   Levels
		want string // type@threshold, in order
	}{
		{"above every threshold", Change{Before: 5000, After: 4000, BaseBefore: 5000, BaseAfter: 5000}, reject, ""},
		{"no move", Change{Before: 500, After: 500, BaseBefore: 5000, BaseAfter: 5000}, reject, ""},
		{"below units", Change{Before: 1000, After: 999, BaseBefore: 5000, BaseAfter: 5000}, reject, "quota.low@1000"},
		{"already below", Change{Before: 999, After: 900, BaseBefore: 5000, BaseAfter: 5000}, reject, ""},
		{"both thresholds, highest first", Change{Before: 1200, After: 100, BaseBefore: 5000, BaseAfter: 5000}, reject, "quota.low@1000 quota.low@500"},
		{"percentage is of the granted total", Change{Before: 2000, After: 1999, BaseBefore: 20000, BaseAfter: 20000}, reject, "quota.low@2000"},
		{"to zero depletes", Change{Before: 300, After: 0, BaseBefore: 5000, BaseAfter: 5000}, reject, "quota.depleted@0"},
		{"everything at once", Change{Before: 5000, After: 0, BaseBefore: 5000, BaseAfter: 5000}, reject, "quota.low@1000 quota.low@500 quota.depleted@0"},
		{"floor: zero is not depletion", Change{Before: 10, After: 0, BaseBefore: 5000, BaseAfter: 5000},
			Levels{Floor: -50}, ""},
		{"floor: reaching -N depletes", Change{Before: 10, After: -50, BaseBefore: 5000, BaseAfter: 5000},
			Levels{Floor: -50}, "quota.depleted@-50"},
		{"overage never depletes", Change{Before: 1000, After: -5000, BaseBefore: 5000, BaseAfter: 5000},
			Levels{Alerts: Alerts{Units: 100}, Unlimited: true}, "quota.low@100"},
		{"grant recovers depletion first, then lowest threshold", Change{Before: 0, After: 1500, BaseBefore: 5000, BaseAfter: 1500, Credit: true},
			reject, "quota.recovered@0 quota.recovered@150 quota.recovered@1000"},
		{"a grant's percentage is of the balance after it", Change{Before: 400, After: 600, BaseBefore: 5000, BaseAfter: 600, Credit: true},
			reject, "quota.recovered@60"},
		{"equal thresholds are one crossing", Change{Before: 10000, After: 500, BaseBefore: 10000, BaseAfter: 10000},
			reject, "quota.low@1000"},
		{"equal thresholds recover once", Change{Before: 500, After: 10000, BaseBefore: 10000, BaseAfter: 10000, Credit: true},
			reject, "quota.recovered@1000"},
		{"the percentage follows the base, not the granted total", Change{Before: 1100, After: 900, BaseBefore: 10000, BaseAfter: 10000},
			Levels{Alerts: Alerts{Percent: 10}}, "quota.low@1000"},
		{"a percentage the new base turns off recovers nothing", Change{Before: 0, After: 3, BaseBefore: 30, BaseAfter: 3, Credit: true},
			Levels{Alerts: Alerts{Units: 50, Percent: 5}}, "quota.recovered@0"},
		{"an expiry lowers the base with the balance", Change{Before: 3000, After: 800, BaseBefore: 10000, BaseAfter: 800},
			Levels{Alerts: Alerts{Percent: 10}}, ""},
		{"grant not enough to recover", Change{Before: -60, After: -50, BaseBefore: 5000, BaseAfter: -50, Credit: true},
			Levels{Floor: -50}, ""},
		{"grant from below the floor", Change{Before: -50, After: -49, BaseBefore: 5000, BaseAfter: -49, Credit: true},
			Levels{Floor: -50}, "quota.recovered@-50"},
		{"no alerts", Change{Before: 1, After: 0, BaseBefore: 5000, BaseAfter: 5000}, Levels{}, "quota.depleted@0"},
		{"percentage of a tiny total is off", Change{Before: 5, After: 1, BaseBefore: 5, BaseAfter: 5}, Levels{Alerts: Alerts{Percent: 10}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.CausedBy = "evt-1"
			got := Crossed("m-1", tt.c, tt.lv, at)
			var s []string
			for _, e := range got {
				s = append(s, fmt.Sprintf("%s@%d", e.Type, *e.Threshold))
				if e.BalanceBefore != tt.c.Before || e.BalanceAfter != tt.c.After || e.MerchantID != "m-1" || !e.OccurredAt.Equal(at) {
					t.Errorf("event %+v does not carry the change", e)
				}
				if want := fmt.Sprintf("evt-1/%s/%d", e.Type, *e.Threshold); e.ID != want {
					t.Errorf("id %q, want %q", e.ID, want)
				}
			}
			if strings.Join(s, " ") != tt.want {
				t.Errorf("Crossed = %q, want %q", strings.Join(s, " "), tt.want)
			}
		})
	}
}

func TestParseAlerts(t *testing.T) {
	tests := []struct {
		in   string
		want Alerts
		bad  bool
	}{
		{in: "1000", want: Alerts{Units: 1000}},
		{in: "10%", want: Alerts{Percent: 10}},
		{in: "1000, 10%", want: Alerts{Units: 1000, Percent: 10}},
		{in: "none"},
		{in: ""},
		{in: "0", bad: true},
		{in: "100%", bad: true},
		{in: "1,2", bad: true},
		{in: "5%,6%", bad: true},
		{in: "x", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseAlerts(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseAlerts(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
	if s := (Alerts{Units: 7, Percent: 3}).String(); s != "7,3%" {
		t.Errorf("String = %q", s)
	}
	if th := (Alerts{Units: 100, Percent: 10}).Thresholds(5000); len(th) != 2 || th[0] != 500 || th[1] != 100 {
		t.Errorf("Thresholds = %v", th)
	}
}
