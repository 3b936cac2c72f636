package ledger

import (
	"context"
	"errors"
	"testing"
)

func TestStaleRejection(t *testing.T) {
	row := func(kind Kind, reason string, amount int64, after *int64) Row {
		return Row{EventID: "e", MerchantID: "m", Kind: kind, Reason: reason, Amount: amount, BalanceAfter: after}
	}
	for _, tc := range []struct {
		name   string
		row    Row
		policy Policy
		stale  bool
	}{
		{"insufficient, MySQL short", row(KindRejected, ReasonInsufficient, 5, ptr(4)), Policy{}, false},
		{"insufficient, MySQL exactly covers", row(KindRejected, ReasonInsufficient, 5, ptr(5)), Policy{}, true},
		{"insufficient, MySQL covers", row(KindRejected, ReasonInsufficient, 5, ptr(50)), Policy{}, true},
		{"insufficient, no balance row", row(KindRejected, ReasonInsufficient, 5, nil), Policy{}, true},
		{"unknown, no balance row", row(KindRejected, ReasonUnknownMerchant, 5, nil), Policy{}, false},
		{"unknown, balance row at zero", row(KindRejected, ReasonUnknownMerchant, 5, ptr(0)), Policy{}, true},
		{"debit is not judged here", row(KindDebit, ReasonPayment, 5, ptr(0)), Policy{}, false},
		{"floor covers below zero", row(KindRejected, ReasonInsufficient, 5, ptr(0)), Policy{Kind: PolicyFloor, Floor: 5}, true},
		{"floor short", row(KindRejected, ReasonInsufficient, 5, ptr(-1)), Policy{Kind: PolicyFloor, Floor: 5}, false},
		{"overage covers everything", row(KindRejected, ReasonInsufficient, 5, ptr(-1000)), Policy{Kind: PolicyOverage}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := staleRejection([]Row{tc.row}, map[string]Policy{"m": tc.policy})
			if (g != nil) != tc.stale {
				t.Fatalf("staleRejection = %v, want stale %v", g, tc.stale)
			}
			if g != nil && (!g.Covered || g.MerchantID != "m" || g.Amount != 5) {
				t.Errorf("GuardError = %+v", g)
			}
		})
	}
}

// TestCommitRefusesRejectionMySQLCovers: a rejected row is written only when
// MySQL agrees, at the row's place in the batch, inside the transaction.
func TestCommitRefusesRejectionMySQLCovers(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)

	refusedBatches := [][]Row{
		{rejected("r1", "m-a", 5, ReasonInsufficient)},                        // 10 covers 5
		{debit("d1", "m-a", 4), rejected("r2", "m-a", 6, ReasonInsufficient)}, // 6 covers 6
		{rejected("r3", "m-a", 1, ReasonUnknownMerchant)},                     // m-a is known
		{debit("d2", "m-b", 1), rejected("r4", "m-a", 3, ReasonInsufficient)}, // m-b unknown: guard
	}
	for _, rows := range refusedBatches {
		err := s.Commit(ctx, rows)
		var g *GuardError
		if !errors.As(err, &g) {
			t.Fatalf("Commit(%s...) = %v, want a *GuardError", rows[0].EventID, err)
		}
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 0 {
		t.Fatalf("a refused batch moved the balance: %+v", b)
	}

	agreed := []Row{debit("d3", "m-a", 7), rejected("r5", "m-a", 4, ReasonInsufficient), rejected("r6", "m-z", 1, ReasonUnknownMerchant)}
	if err := s.Commit(ctx, agreed); err != nil {
		t.Fatalf("Commit of rejections MySQL agrees with = %v", err)
	}
	existing, err := s.ExistingEvents(ctx, []string{"r1", "r2", "r3", "r4", "r5", "r6"})
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 2 || existing["r5"].Kind != KindRejected || existing["r6"].Kind != KindRejected {
		t.Errorf("rows written = %v, want only r5 and r6", existing)
	}
	checkBalancesMatchLedger(t, s)
}
