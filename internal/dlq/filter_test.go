package dlq

import (
	"slices"
	"testing"
	"time"
)

var filterNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestFilterMatch(t *testing.T) {
	at := func(min int) time.Time { return filterNow.Add(time.Duration(min) * time.Minute) }
	entry := func(class Class, merchant, eventID string, p int, off int64, ts time.Time) Entry {
		return Entry{Record: Record{Class: class, Partition: p, Offset: off, Time: ts}, Merchant: merchant, EventID: eventID}
	}
	e := entry(ClassConflict, "m-1", "evt-1", 2, 40, at(0))
	tests := []struct {
		name string
		f    Filter
		want bool
	}{
		{"zero filter selects all", Filter{}, true},
		{"class hit", Filter{Classes: []Class{ClassInvalid, ClassConflict}}, true},
		{"class miss", Filter{Classes: []Class{ClassInvalid}}, false},
		{"merchant hit", Filter{Merchants: []string{"m-1"}}, true},
		{"merchant miss", Filter{Merchants: []string{"m-10"}}, false},
		{"event hit", Filter{EventIDs: []string{"evt-0", "evt-1"}}, true},
		{"event miss", Filter{EventIDs: []string{"evt-11"}}, false},
		{"since equal is in", Filter{Since: TimeBound{At: at(0)}}, true},
		{"since after", Filter{Since: TimeBound{At: at(1)}}, false},
		{"until equal is out", Filter{Until: TimeBound{At: at(0)}}, false},
		{"until after", Filter{Until: TimeBound{At: at(1)}}, true},
		{"partition hit", Filter{Partitions: []int{0, 2}}, true},
		{"partition miss", Filter{Partitions: []int{1}}, false},
		{"offset from equal", Filter{OffsetFrom: 40}, true},
		{"offset from above", Filter{OffsetFrom: 41}, false},
		{"offset end above", Filter{OffsetEnd: 41}, true},
		{"offset end equal is out", Filter{OffsetEnd: 40}, false},
		{"replay count hit", Filter{ReplayCounts: []int{0, 1}}, true},
		{"replay count miss", Filter{ReplayCounts: []int{2}}, false},
		{"all together", Filter{Classes: []Class{ClassConflict}, Merchants: []string{"m-1"}, EventIDs: []string{"evt-1"},
			Since: TimeBound{At: at(-1)}, Until: TimeBound{At: at(1)}, Partitions: []int{2}, OffsetFrom: 40, OffsetEnd: 41}, true},
		{"all but one", Filter{Classes: []Class{ClassConflict}, Merchants: []string{"m-2"}, EventIDs: []string{"evt-1"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.match(e); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterKeyIsCanonical(t *testing.T) {
	since := TimeBound{Spec: "2h", At: filterNow.Add(-2 * time.Hour)}
	later := TimeBound{Spec: "2h", At: filterNow.Add(-time.Hour)}
	tests := []struct {
		name string
		a, b Filter
		same bool
	}{
		{"order and repeats", Filter{Merchants: []string{"b", "a", "b"}, Classes: []Class{ClassRefused, ClassInvalid}},
			Filter{Merchants: []string{"a", "b"}, Classes: []Class{ClassInvalid, ClassRefused}}, true},
		{"relative time keyed by its text", Filter{Since: since}, Filter{Since: later}, true},
		{"offsets differ", Filter{OffsetFrom: 1}, Filter{OffsetFrom: 2}, false},
		{"merchant vs event id", Filter{Merchants: []string{"x"}}, Filter{EventIDs: []string{"x"}}, false},
		{"partitions", Filter{Partitions: []int{1, 0}}, Filter{Partitions: []int{0, 1}}, true},
		{"replay counts", Filter{ReplayCounts: []int{2, 0}}, Filter{ReplayCounts: []int{0, 2}}, true},
		{"replay count vs none", Filter{ReplayCounts: []int{0}}, Filter{}, false},
		{"absolute time without spec", Filter{Until: TimeBound{At: filterNow}}, Filter{Until: TimeBound{Spec: "2026-11-29T12:00:00Z", At: filterNow}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.key() == tt.b.key(); got != tt.same {
				t.Fatalf("keys %q and %q: same=%v, want %v", tt.a.key(), tt.b.key(), got, tt.same)
			}
		})
	}
	if k := (Filter{}).key(); k != "all" {
		t.Errorf("zero filter key %q", k)
	}
	if k := (Filter{OffsetFrom: 3, OffsetEnd: 10}).key(); k != "offset-from=3 offset-to=9" {
		t.Errorf("offset key %q", k)
	}
}

func TestFilterNarrow(t *testing.T) {
	rs := []Range{{0, 5, 50}, {1, 0, 10}, {2, 20, 30}}
	tests := []struct {
		name string
		f    Filter
		want []Range
	}{
		{"none", Filter{}, rs},
		{"partitions", Filter{Partitions: []int{2, 0}}, []Range{{0, 5, 50}, {2, 20, 30}}},
		{"from", Filter{OffsetFrom: 8}, []Range{{0, 8, 50}, {1, 8, 10}, {2, 20, 30}}},
		{"end", Filter{OffsetEnd: 25}, []Range{{0, 5, 25}, {1, 0, 10}, {2, 20, 25}}},
		{"window outside a range is empty", Filter{OffsetFrom: 12, OffsetEnd: 15}, []Range{{0, 12, 15}, {1, 12, 12}, {2, 20, 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.narrow(rs); !slices.Equal(got, tt.want) {
				t.Fatalf("narrow = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	tests := []struct {
		name string
		f    Filter
		ok   bool
	}{
		{"zero", Filter{}, true},
		{"offsets", Filter{OffsetFrom: 3, OffsetEnd: 4}, true},
		{"empty offsets", Filter{OffsetFrom: 4, OffsetEnd: 4}, false},
		{"negative from", Filter{OffsetFrom: -1}, false},
		{"window", Filter{Since: TimeBound{At: filterNow}, Until: TimeBound{At: filterNow.Add(time.Second)}}, true},
		{"backward window", Filter{Since: TimeBound{At: filterNow}, Until: TimeBound{At: filterNow}}, false},
		{"negative partition", Filter{Partitions: []int{-1}}, false},
		{"negative replay count", Filter{ReplayCounts: []int{-1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
