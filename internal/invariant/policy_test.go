package invariant

import (
	"context"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/testenv"
)

// The checker reads each merchant's overdraft policy: a floor merchant may sit
// down to its floor and an overage merchant anywhere below zero, and an
// overage row must record exactly the part of its debit below zero.
func TestCheckKnowsOverdraftPolicies(t *testing.T) {
	produced := Produced{Valid: []event.PaymentSucceeded{
		ev("f-1", "m-floor", 10), ev("f-2", "m-floor", 15), ev("o-1", "m-over", 7), ev("o-2", "m-over", 5)}}
	tests := []struct {
		name   string
		mutate []string
		want   string // "" for a clean state
	}{
		{"within the policies", nil, ""},
		{"below the floor", []string{
			"UPDATE merchant_balance SET debited = 26 WHERE merchant_id = 'm-floor'",
			"UPDATE quota_ledger SET amount = 16, balance_after = -21 WHERE event_id = 'f-2'"},
			"merchant m-floor overdrawn: credited 5, debited 26 (policy floor 20)"},
		{"overage recorded wrong", []string{"UPDATE quota_ledger SET overage = 1 WHERE event_id = 'o-2'"},
			"debit o-2 of merchant m-over records overage 1, want 5"},
		{"overage not recorded", []string{"UPDATE quota_ledger SET overage = 0 WHERE event_id = 'o-1'"},
			"debit o-1 of merchant m-over records overage 0, want 2"},
		{"overage under another policy", []string{"UPDATE quota_ledger SET overage = 3 WHERE event_id = 'f-1'"},
			"debit f-1 of merchant m-floor records overage 3, want 5"},
		{"overage on a credit", []string{"UPDATE quota_ledger SET overage = 2 WHERE event_id = 'g-f'"},
			"credit g-f of merchant m-floor records overage 2, want 0"},
		{"the floor merchant as reject", []string{"UPDATE merchant_balance SET overdraft_policy = 'reject', overdraft_floor = 0 WHERE merchant_id = 'm-floor'"},
			"debit f-2 left merchant m-floor at -20 (policy reject)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := testenv.NewMySQL(t)
			rdb := testenv.NewRedis(t)
			for _, q := range append([]string{
				`INSERT INTO merchant_balance (merchant_id, credited, debited, overdraft_policy, overdraft_floor, seq) VALUES
					('m-floor', 5, 25, 'floor', 20, 3), ('m-over', 5, 12, 'overage', 0, 3)`,
				`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, overage, occurred_at, seq) VALUES
					(1, 'g-f', 'm-floor', 'credit', 5, 5, 0, NOW(), 1),
					(2, 'f-1', 'm-floor', 'debit', 10, -5, 0, NOW(), 2),
					(3, 'f-2', 'm-floor', 'debit', 15, -20, 0, NOW(), 3),
					(4, 'g-o', 'm-over', 'credit', 5, 5, 0, NOW(), 1),
					(5, 'o-1', 'm-over', 'debit', 7, -2, 2, NOW(), 2),
					(6, 'o-2', 'm-over', 'debit', 5, -7, 5, NOW(), 3)`,
			}, tt.mutate...) {
				if err := db.DB.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
			rdb.Client.HSet(ctx, rdb.Keys.Quota("m-floor"), "remain", -20, "ver", 1, "floor", 20)
			rdb.Client.HSet(ctx, rdb.Keys.Quota("m-over"), "remain", -7, "ver", 1, "floor", "inf")
			r, err := Check(ctx, produced, State{DB: db.DB, Redis: rdb.Client, Keys: rdb.Keys})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && !r.OK():
				t.Fatalf("reported broken:\n%s", r)
			case tt.want != "" && (r.OK() || !r.Broken[Overdraft] || !strings.Contains(r.String(), tt.want)):
				t.Fatalf("want an overdraft violation with %q, got %v:\n%s", tt.want, r.Broken, r)
			}
		})
	}
}
