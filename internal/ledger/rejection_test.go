package ledger

import (
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
			g := StaleRejection([]Row{tc.row}, map[string]Policy{"m": tc.policy})
			if (g != nil) != tc.stale {
				t.Fatalf("StaleRejection = %v, want stale %v", g, tc.stale)
			}
			if g != nil && (!g.Covered || g.MerchantID != "m" || g.Amount != 5) {
				t.Errorf("GuardError = %+v", g)
			}
		})
	}
}

func ptr(v int64) *int64 { return &v }
