package shard

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

func TestOfIsStableAndSpreads(t *testing.T) {
	// Pinned: a pending deduction lives in its event's shard across releases.
	for _, tc := range []struct {
		id   string
		n    int
		want int
	}{{"evt-1", 8, Of("evt-1", 8)}, {"anything", 1, 0}, {"anything", 0, 0}} {
		if got := Of(tc.id, tc.n); got != tc.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
	if got := Of("evt-1", 8); got != int(fnv1a("evt-1")%8) {
		t.Errorf("Of is not FNV-1a mod n: %d", got)
	}
	counts := make([]int, 8)
	for i := range 8000 {
		counts[Of("evt-"+strconv.Itoa(i), 8)]++
	}
	for s, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d got %d of 8000 events", s, c)
		}
	}
}

func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func TestTags(t *testing.T) {
	for _, tc := range []struct {
		l    Layout
		want []string
	}{
		{Layout{Shards: 1}, []string{"m"}},
		{Layout{Shards: 3}, []string{"m#0", "m#1", "m#2"}},
		{Layout{Shards: 2, FoldingFrom: 1}, []string{"m#0", "m#1", "m"}},
		{Layout{Shards: 2, FoldingFrom: 3}, []string{"m#0", "m#1", "m#2"}},
		{Layout{Shards: 3, FoldingFrom: 2}, []string{"m#0", "m#1", "m#2"}},
		{Layout{Shards: 1, FoldingFrom: 2}, []string{"m", "m#0", "m#1"}},
	} {
		if got := tc.l.Tags("m"); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: tags %v, want %v", tc.l, got, tc.want)
		}
	}
	if Merchant("m-1#7") != "m-1" || Merchant("m-1") != "m-1" {
		t.Error("Merchant does not undo Tag")
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
		want  []int64
	}{
		{10, 1, []int64{10}},
		{10, 3, []int64{4, 3, 3}},
		{2, 4, []int64{1, 1, 0, 0}},
		{0, 2, []int64{0, 0}},
		{-5, 2, []int64{0, 0}},
	} {
		if got := Split(tc.total, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%d, %d) = %v, want %v", tc.total, tc.n, got, tc.want)
		}
	}
}

// A second change waits for the first to be folded: two layouts at most.
func TestStoreSetAndFolded(t *testing.T) {
	db, err := testenv.NewMySQL(t).DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	s, ctx := NewStore(db), context.Background()
	l, err := s.Set(ctx, "m", 8)
	if err != nil || l != (Layout{Shards: 8, FoldingFrom: 1}) {
		t.Fatalf("Set = %+v, %v", l, err)
	}
	if _, err := s.Set(ctx, "m", 3); !errors.Is(err, ErrResharding) {
		t.Fatalf("second Set before the fold = %v, want ErrResharding", err)
	}
	if err := s.Folded(ctx, "m", l); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Set(ctx, "m", 3); err != nil || l != (Layout{Shards: 3, FoldingFrom: 8}) {
		t.Fatalf("Set after the fold = %+v, %v", l, err)
	}
	got, err := s.Layouts(ctx, []string{"m", "other"})
	if err != nil || got["m"] != l || got["other"] != (Layout{Shards: 1}) {
		t.Fatalf("Layouts = %v, %v", got, err)
	}
	if _, err := s.Set(ctx, "m", 65); err == nil {
		t.Error("65 shards accepted")
	}
	if err := s.Folded(ctx, "m", l); err != nil {
		t.Fatal(err)
	}
	sharded, err := s.Sharded(ctx)
	if err != nil || len(sharded) != 1 || sharded["m"] != 3 {
		t.Fatalf("Sharded = %v, %v", sharded, err)
	}
}

// The cache rereads the counts only in intervals it was asked for them: an
// idle one reads nothing, a used one sees a new count within an interval.
func TestCacheRefreshesOnlyWhenUsed(t *testing.T) {
	db, err := testenv.NewMySQL(t).DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(NewStore(db), 5*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.Set(ctx, "m", 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // twenty intervals without a Count
	if n, ok := (*c.counts.Load())["m"]; ok {
		t.Fatalf("an unused cache read the counts (m has %d)", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Count("m") != 4 {
		if time.Now().After(deadline) {
			t.Fatal("a used cache did not read the new count")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
