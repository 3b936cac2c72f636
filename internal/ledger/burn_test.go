package ledger

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
)

func TestAttribute(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	g := func(id string, rem int64, prio int, exp *time.Time, age time.Duration) Grant {
		return Grant{ID: id, Amount: rem, Remaining: rem, Priority: prio, ExpiresAt: exp, CreatedAt: t0.Add(-age)}
	}
	tests := []struct {
		name   string
		grants []Grant
		debits []int64
		want   [][]Part
		left   map[string]int64
	}{
		{"one grant", []Grant{g("a", 10, 50, nil, 0)}, []int64{3, 4},
			[][]Part{{{"a", 3}}, {{"a", 4}}}, map[string]int64{"a": 3}},
		{"lower priority first", []Grant{g("p2", 10, 2, nil, 0), g("p1", 10, 1, nil, 0)}, []int64{5},
			[][]Part{{{"p1", 5}}}, map[string]int64{"p1": 5, "p2": 10}},
		{"earliest expiry first within a priority", []Grant{g("late", 10, 1, at(2*time.Hour), 0), g("soon", 10, 1, at(time.Hour), 0)}, []int64{5},
			[][]Part{{{"soon", 5}}}, map[string]int64{"soon": 5, "late": 10}},
		{"never-expiring last within a priority", []Grant{g("never", 10, 1, nil, time.Hour), g("exp", 10, 1, at(time.Hour), 0)}, []int64{5},
			[][]Part{{{"exp", 5}}}, map[string]int64{"exp": 5, "never": 10}},
		{"priority beats expiry", []Grant{g("exp", 10, 2, at(time.Minute), 0), g("never", 10, 1, nil, 0)}, []int64{5},
			[][]Part{{{"never", 5}}}, map[string]int64{"exp": 10, "never": 5}},
		{"oldest first at equal priority and expiry", []Grant{g("new", 10, 1, nil, 0), g("old", 10, 1, nil, time.Hour)}, []int64{5},
			[][]Part{{{"old", 5}}}, map[string]int64{"old": 5, "new": 10}},
		{"a debit split over two grants", []Grant{g("a", 3, 1, nil, 0), g("b", 10, 2, nil, 0)}, []int64{2, 4, 1},
			[][]Part{{{"a", 2}}, {{"a", 1}, {"b", 3}}, {{"b", 1}}}, map[string]int64{"a": 0, "b": 6}},
		{"beyond every grant is owed", []Grant{g("a", 3, 1, nil, 0)}, []int64{5, 2},
			[][]Part{{{"a", 3}, {"", 2}}, {{"", 2}}}, map[string]int64{"a": 0}},
		{"no grant: owed", nil, []int64{4}, [][]Part{{{"", 4}}}, map[string]int64{}},
		{"used-up grants are skipped", []Grant{g("a", 0, 1, nil, 0), g("b", 5, 2, nil, 0)}, []int64{5},
			[][]Part{{{"b", 5}}}, map[string]int64{"a": 0, "b": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Attribute(tt.grants, tt.debits)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parts = %v, want %v", got, tt.want)
			}
			left := map[string]int64{}
			for _, g := range tt.grants {
				left[g.ID] = g.Remaining
			}
			if !reflect.DeepEqual(left, tt.left) {
				t.Errorf("remaining = %v, want %v", left, tt.left)
			}
		})
	}
}

func TestPayBackKeepsGrantsEqualToBalance(t *testing.T) {
	tests := []struct{ available, amount, want int64 }{
		{0, 10, 10}, {5, 10, 10}, {-3, 10, 7}, {-10, 10, 0}, {-15, 10, 0},
	}
	for _, tt := range tests {
		if got := PayBack(tt.available, tt.amount); got != tt.want {
			t.Errorf("PayBack(%d, %d) = %d, want %d", tt.available, tt.amount, got, tt.want)
		}
		// The grants' remaining sums to max(available, 0), before and after.
		if got := PayBack(tt.available, tt.amount); got != max(0, tt.available+tt.amount)-max(0, tt.available) {
			t.Errorf("PayBack(%d, %d) breaks the sum", tt.available, tt.amount)
		}
	}
}

func TestHeadAndUnbacked(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	grants := []Grant{{ID: "a", Remaining: 0, ExpiresAt: &t0}, {ID: "b", Remaining: 4, ExpiresAt: &t1}, {ID: "c", Remaining: 6}}
	h, next, ok := Head(grants)
	if !ok || h.ID != "b" || next == nil || !next.Equal(t1) {
		t.Errorf("Head = %s %v %v; want b, %v (a used-up grant neither heads nor expires)", h.ID, next, ok, t1)
	}
	if _, _, ok := Head([]Grant{{ID: "a"}}); ok {
		t.Error("Head of used-up grants found one")
	}
	if u := Unbacked(15, grants); u != 5 {
		t.Errorf("Unbacked = %d, want 5", u)
	}
	if u := Unbacked(-3, nil); u != 0 {
		t.Errorf("Unbacked of a debt = %d, want 0", u)
	}
}

func TestRollover(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g := Grant{ID: "plan:m:1", MerchantID: "m", Amount: 100, Remaining: 70, Priority: 3, StartsAt: start, ExpiresAt: &end, RolloverMax: 50}
	r, ok := Rollover(g)
	want := end.Add(end.Sub(start))
	if !ok || r.ID != "rollover:plan:m:1" || r.Amount != 50 || r.Remaining != 50 || r.Priority != 3 ||
		!r.StartsAt.Equal(end) || !r.ExpiresAt.Equal(want) || r.RolloverMax != 0 {
		t.Errorf("Rollover = %+v", r)
	}
	g.Remaining = 20
	if r, _ := Rollover(g); r.Amount != 20 {
		t.Errorf("rollover of 20 under a max of 50 = %d", r.Amount)
	}
	g.Remaining = 0
	if _, ok := Rollover(g); ok {
		t.Error("rolled over nothing")
	}
}

func TestDerivedID(t *testing.T) {
	long := strings.Repeat("g", 64)
	a, b := DerivedID("expire:", long), DerivedID("expire:", long+"x")
	if len(a) != 64 || a == b || !strings.HasPrefix(a, "expire:") || a != DerivedID("expire:", long) {
		t.Errorf("DerivedID of long ids: %q, %q", a, b)
	}
	if got := ExpireID("g-1"); got != "expire:g-1" {
		t.Errorf("ExpireID = %q", got)
	}
}

// Every id billing derives starts with a prefix that payments and grants
// from outside may not use (event.Reserved), so none can take its place.
func TestDerivedIDsAreReserved(t *testing.T) {
	for _, id := range []string{ExpireID("g-1"), DerivedID("rollover:", "g-1"), DerivedID("opening:", "m@0"), DerivedID("plan:", "m:0"), RevokeID("g-1"), BilledID("g-1"),
		ExpireID(strings.Repeat("g", 64))} {
		if _, ok := event.Reserved(id); !ok {
			t.Errorf("derived id %q is not reserved", id)
		}
	}
}
