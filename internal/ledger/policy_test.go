package ledger

import "testing"

func TestPolicy(t *testing.T) {
	floor := Policy{Kind: PolicyFloor, Floor: 10}
	over := Policy{Kind: PolicyOverage}
	for _, tc := range []struct {
		p                Policy
		before, amount   int64
		covers           bool
		overage          int64
		redis, stringify string
	}{
		{Policy{}, 5, 5, true, 0, "0", "reject"},
		{Policy{}, 5, 6, false, 0, "0", "reject"},
		{floor, 5, 15, true, 0, "10", "floor 10"},
		{floor, 5, 16, false, 0, "10", "floor 10"},
		{over, 5, 1_000_000, true, 999_995, "inf", "overage"},
		{over, -3, 4, true, 4, "inf", "overage"},
		{over, 9, 4, true, 0, "inf", "overage"},
	} {
		if got := tc.p.Covers(tc.before, tc.amount); got != tc.covers {
			t.Errorf("%s covers %d from %d = %v", tc.p, tc.amount, tc.before, got)
		}
		if got := tc.p.Overage(tc.before, tc.amount); got != tc.overage {
			t.Errorf("%s overage of %d from %d = %d, want %d", tc.p, tc.amount, tc.before, got, tc.overage)
		}
		if tc.p.RedisFloor() != tc.redis || tc.p.String() != tc.stringify {
			t.Errorf("%+v: redis %q string %q", tc.p, tc.p.RedisFloor(), tc.p.String())
		}
	}
}
