package ledgerdb

import (
	"context"
	"errors"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
)

// TestCommitRefusesRejectionMySQLCovers: a rejected row is written only when
// MySQL agrees, at the row's place in the batch, inside the transaction.
func TestCommitRefusesRejectionMySQLCovers(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)

	refusedBatches := [][]ledger.Row{
		{rejected("r1", "m-a", 5, ledger.ReasonInsufficient)},                        // 10 covers 5
		{debit("d1", "m-a", 4), rejected("r2", "m-a", 6, ledger.ReasonInsufficient)}, // 6 covers 6
		{rejected("r3", "m-a", 1, ledger.ReasonUnknownMerchant)},                     // m-a is known
		{debit("d2", "m-b", 1), rejected("r4", "m-a", 3, ledger.ReasonInsufficient)}, // m-b unknown: guard
	}
	for _, rows := range refusedBatches {
		err := s.Commit(ctx, rows)
		var g *ledger.GuardError
		if !errors.As(err, &g) {
			t.Fatalf("Commit(%s...) = %v, want a *GuardError", rows[0].EventID, err)
		}
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 0 {
		t.Fatalf("a refused batch moved the balance: %+v", b)
	}

	agreed := []ledger.Row{debit("d3", "m-a", 7), rejected("r5", "m-a", 4, ledger.ReasonInsufficient), rejected("r6", "m-z", 1, ledger.ReasonUnknownMerchant)}
	if err := s.Commit(ctx, agreed); err != nil {
		t.Fatalf("Commit of rejections MySQL agrees with = %v", err)
	}
	existing, err := s.ExistingEvents(ctx, []string{"r1", "r2", "r3", "r4", "r5", "r6"})
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 2 || existing["r5"].Kind != ledger.KindRejected || existing["r6"].Kind != ledger.KindRejected {
		t.Errorf("rows written = %v, want only r5 and r6", existing)
	}
	checkBalancesMatchLedger(t, s)
}
