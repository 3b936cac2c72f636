package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
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
		if g.State == ledger.GrantActive {
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
	if _, err := s.Grant(ctx, []ledger.Credit{{ID: "h", MerchantID: "m", Amount: 100, Priority: 2, ExpiresAt: &expires}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e-1", "m", 30)}); err != nil { // paid by h, the head
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, []ledger.Credit{{ID: "g", MerchantID: "m", Amount: 50, Priority: 1}}); err != nil { // g burns first now
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
	if err := s.Commit(ctx, []ledger.Row{debit("e-2", "m", 60)}); err != nil { // g's 50, then 10 of h
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
		if r.Kind == ledger.KindExpire {
			expired += r.Amount
		}
	}
	if b := balanceOf(t, s, "m"); expired != 60 || b.Available() != 0 {
		t.Fatalf("h expired %d (want 60), available %d (want 0)", expired, b.Available())
	}
}

// With two expiring grants, the balance row waits for the earlier expiry:
// once it is due, the expiry sweep finds the merchant and the guard refuses
// every debit until the expiry is recorded, so no debit is paid by the
// expired grant and its remainder leaves at its own expiry, not the later one's.
func TestGuardWaitsForTheEarliestExpiry(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	early, late := now.Add(time.Hour), now.Add(2*time.Hour)
	if _, err := s.Grant(ctx, []ledger.Credit{
		{ID: "late", MerchantID: "m", Amount: 100, ExpiresAt: &late},
		{ID: "early", MerchantID: "m", Amount: 100, ExpiresAt: &early},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e-1", "m", 30)}); err != nil { // paid by early, which expires first
		t.Fatal(err)
	}
	// An hour and a second pass: every expiry the store wrote moves back by
	// as much, so the earlier one is due and the later one is not.
	for _, q := range []string{"UPDATE quota_grants SET expires_at = expires_at - INTERVAL 3601 SECOND WHERE merchant_id = 'm'",
		"UPDATE merchant_balance SET next_expiry = next_expiry - INTERVAL 3601 SECOND WHERE merchant_id = 'm'"} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if due, err := s.DueExpiries(ctx, 10); err != nil || len(due) != 1 || due[0] != "m" {
		t.Errorf("due %v (%v) past the earlier expiry, want [m]", due, err)
	}
	var due *ledger.ExpiryDueError
	if err := s.Commit(ctx, []ledger.Row{debit("e-2", "m", 10)}); !errors.As(err, &due) {
		t.Fatalf("a debit past the earlier expiry, before it is recorded: %v; want the guard to wait for it (ExpiryDueError)", err)
	}
	if _, err := s.Expire(ctx, []string{"m"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e-2", "m", 10)}); err != nil {
		t.Fatalf("a debit once the expiry is recorded: %v", err)
	}
	sum, got := activeGrants(t, s, "m")
	if b := balanceOf(t, s, "m"); b.Available() != 90 || sum != 90 || got["late"] != 90 {
		t.Errorf("available %d, active grants %v; want 90, all of it the later grant's (the earlier one's 70 expired)", b.Available(), got)
	}
}

// Expiry compares with MySQL's clock in UTC, as the times it stores are
// written: a session in another time zone neither expires a grant early nor late.
func TestExpiryIgnoresTheSessionTimeZone(t *testing.T) {
	s := eastStore(t)
	ctx := context.Background()
	hour := time.Now().UTC().Add(time.Hour)
	if _, err := s.Grant(ctx, []ledger.Credit{{ID: "g-hour", MerchantID: "m", Amount: 100, ExpiresAt: &hour}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e-1", "m", 10)}); err != nil {
		t.Fatalf("a grant an hour from its expiry refused a debit: %v", err)
	}
	if due, err := s.DueExpiries(ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("due %v (%v), want none", due, err)
	}
	soon := time.Now().UTC().Add(300 * time.Millisecond)
	if _, err := s.Grant(ctx, []ledger.Credit{{ID: "g-soon", MerchantID: "n", Amount: 100, ExpiresAt: &soon}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if due, err := s.DueExpiries(ctx, 10); err != nil || len(due) != 1 || due[0] != "n" {
		t.Fatalf("due %v (%v), want [n]", due, err)
	}
}

// The next expiry is the earliest of every merchant's, by MySQL's clock in
// UTC whatever the session's time zone; none before any grant expires.
func TestUntilNextExpiry(t *testing.T) {
	s := eastStore(t)
	ctx := context.Background()
	if _, ok, err := s.UntilNextExpiry(ctx); err != nil || ok {
		t.Fatalf("before any grant: %v, %v; want none", ok, err)
	}
	now := time.Now().UTC()
	early, late := now.Add(time.Hour), now.Add(2*time.Hour)
	if _, err := s.Grant(ctx, []ledger.Credit{
		{ID: "late", MerchantID: "m-1", Amount: 100, ExpiresAt: &late},
		{ID: "early", MerchantID: "m-2", Amount: 100, ExpiresAt: &early},
		{ID: "never", MerchantID: "m-3", Amount: 100},
	}); err != nil {
		t.Fatal(err)
	}
	d, ok, err := s.UntilNextExpiry(ctx)
	if err != nil || !ok || d <= 59*time.Minute || d > time.Hour {
		t.Fatalf("next expiry in %v (%v, %v), want m-2's, within the hour", d, ok, err)
	}
}

// eastStore is a store whose sessions run in UTC+2.
func eastStore(t *testing.T) *Store {
	t.Helper()
	db := testenv.NewMySQL(t)
	east, err := sql.Open("mysql", db.DSN+"&time_zone=%27%2B02%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { east.Close() })
	s, err := New(east, &counterIDs{}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
