package invariant

import (
	"context"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/testenv"
)

// The grants are accounted for: every unit of a grant is remaining, paid by
// a debit that names it, or expired by its one expire row, and the active
// grants back the balance.
func TestCheckAccountsForGrants(t *testing.T) {
	produced := Produced{Valid: []event.PaymentSucceeded{ev("e-1", "m-g", 20), ev("e-2", "m-g", 10)}}
	tests := []struct {
		name   string
		mutate []string
		want   string // "" for a clean state
	}{
		{"accounted", nil, ""},
		{"expired with a remainder", []string{"UPDATE quota_grants SET remaining = 5 WHERE grant_id = 'g-a'"},
			"grant g-a expired with 5 remaining"},
		{"units lost", []string{"UPDATE quota_grants SET remaining = 45 WHERE grant_id = 'g-b'"},
			"merchant m-g: active grants' remaining 45 != max(available, 0) = 50"},
		{"expired twice", []string{`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, grant_id, occurred_at)
			VALUES (6, 'expire-again:g-a', 'm-g', 'expire', 1, 49, 'g-a', NOW())`},
			"(2 expire rows)"},
		{"paid by a grant that does not exist", []string{"UPDATE quota_ledger SET grant_id = 'g-x' WHERE event_id = 'e-2'"},
			"1 debit row(s) name grant g-x, which does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := testenv.NewMySQL(t)
			for _, q := range append([]string{
				"INSERT INTO merchant_balance (merchant_id, credited, debited, seq) VALUES ('m-g', 100, 50, 5)",
				`INSERT INTO quota_grants (grant_id, merchant_id, amount, remaining, priority, starts_at, expires_at, state) VALUES
					('g-a', 'm-g', 40, 0, 1, NOW(), NOW(), 'expired'),
					('g-b', 'm-g', 60, 50, 2, NOW(), NULL, 'active')`,
				`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, grant_id, occurred_at, seq) VALUES
					(1, 'g-a', 'm-g', 'credit', 40, 40, NULL, NOW(), 1),
					(2, 'g-b', 'm-g', 'credit', 60, 100, NULL, NOW(), 2),
					(3, 'e-1', 'm-g', 'debit', 20, 80, 'g-a', NOW(), 3),
					(4, 'expire:g-a', 'm-g', 'expire', 20, 60, 'g-a', NOW(), 4),
					(5, 'e-2', 'm-g', 'debit', 10, 50, 'g-b', NOW(), 5)`,
			}, tt.mutate...) {
				if err := db.DB.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
			r, err := Check(ctx, produced, State{DB: db.DB})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && !r.OK():
				t.Fatalf("reported broken:\n%s", r)
			case tt.want != "" && (r.OK() || !r.Broken[Grants] || !strings.Contains(r.String(), tt.want)):
				t.Fatalf("want a grants violation with %q, got %v:\n%s", tt.want, r.Broken, r)
			}
		})
	}
}
