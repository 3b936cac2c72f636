package ledger

import (
	"context"
	"testing"
	"time"
)

// activeGrants sums a merchant's active grants' remaining, and lists them.
func activeGrants(t *testing.T, s *Store, m string) (int64, map[string]int64) {
	t.Helper()
	gs, err := s.Grants(context.Background(), []string{m}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	out := map[string]int64{}
	for _, g := range gs[m] {
		if g.State == GrantActive {
			sum += g.Remaining
			out[g.ID] = g.Remaining
		}
	}
	return sum, out
}

// A head grant that has paid and is then overtaken by a grant that burns
// first keeps what it paid: its remaining is written when the head moves on,
// so it later pays and expires with the true remainder, not its amount.
func TestOvertakenHeadKeepsWhatItPaid(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	expires := time.Now().UTC().Add(1500 * time.Millisecond)
	if _, err := s.Grant(ctx, []Credit{{ID: "h", MerchantID: "m", Amount: 100, Priority: 2, ExpiresAt: &expires}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []Row{debit("e-1", "m", 30)}); err != nil { // paid by h, the head
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, []Credit{{ID: "g", MerchantID: "m", Amount: 50, Priority: 1}}); err != nil { // g burns first now
		t.Fatal(err)
	}
	check := func(when string, want map[string]int64) {
		t.Helper()
		sum, got := activeGrants(t, s, "m")
		if b := balanceOf(t, s, "m"); sum != max(0, b.Available()) || len(got) != len(want) {
			t.Fatalf("%s: grants %v sum to %d, available %d; want %v", when, got, sum, b.Available(), want)
		}
		for id, r := range want {
			if got[id] != r {
				t.Fatalf("%s: grants %v, want %v", when, got, want)
			}
		}
	}
	check("after g", map[string]int64{"g": 50, "h": 70})
	if err := s.Commit(ctx, []Row{debit("e-2", "m", 60)}); err != nil { // g's 50, then 10 of h
		t.Fatal(err)
	}
	check("after e-2", map[string]int64{"h": 60})
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	if _, err := s.Expire(ctx, []string{"m"}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.MerchantRows(ctx, "m", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var expired int64
	for _, r := range rows {
		if r.Kind == KindExpire {
			expired += r.Amount
		}
	}
	if b := balanceOf(t, s, "m"); expired != 60 || b.Available() != 0 {
		t.Fatalf("h expired %d (want 60), available %d (want 0)", expired, b.Available())
	}
}
