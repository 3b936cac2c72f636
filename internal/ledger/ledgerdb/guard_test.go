package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
)

func TestBalanceMove(t *testing.T) {
	tests := []struct {
		name      string
		merchants []string
		debits    map[string]int64
		args      []any
		guard     bool
	}{
		{"rejections only: no balance guard", []string{"m-a"}, map[string]int64{"m-a": 0},
			[]any{"m-a", int64(1), "m-a"}, false},
		{"one", []string{"m-a"}, map[string]int64{"m-a": 5},
			[]any{"m-a", int64(5), "m-a", int64(1), "m-a", "m-a", int64(5)}, true},
		{"rejections only are not guarded", []string{"m-a", "m-b", "m-c"}, map[string]int64{"m-a": 2, "m-b": 0, "m-c": 7},
			[]any{"m-a", int64(2), "m-c", int64(7), "m-a", int64(1), "m-b", int64(1), "m-c", int64(1), "m-a", "m-b", "m-c", "m-b", "m-a", int64(2), "m-c", int64(7)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := map[string]int64{}
			for _, m := range tt.merchants {
				rows[m] = 1
			}
			sql, args := balanceMove(tt.merchants, tt.debits, rows)
			if !reflect.DeepEqual(args, tt.args) {
				t.Fatalf("args %v; want %v", args, tt.args)
			}
			if n := strings.Count(sql, "?"); n != len(args) {
				t.Fatalf("%d placeholders for %d args: %s", n, len(args), sql)
			}
			for _, want := range []string{"FORCE INDEX (PRIMARY)", "seq = seq + CASE merchant_id", "next_expiry IS NULL OR next_expiry > UTC_TIMESTAMP(6)"} {
				if !strings.Contains(sql, want) {
					t.Fatalf("sql lacks %q: %s", want, sql)
				}
			}
			if got := strings.Contains(sql, "credited - debited + overdraft_floor >= CASE merchant_id"); got != tt.guard {
				t.Fatalf("balance guard %v, want %v: %s", got, tt.guard, sql)
			}
		})
	}
}

// Many merchants in one batch: one UPDATE moves them all, each by its own
// total; a guard that fails anywhere names the first such merchant (in
// merchant order) and nothing is written.
func TestCommitManyMerchants(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const n = 300
	for i := range n {
		grant(t, s, fmt.Sprintf("m-%03d", i), 100)
	}
	var rows []ledger.Row
	for i := range n {
		m := fmt.Sprintf("m-%03d", i)
		rows = append(rows, debit("a-"+m, m, int64(1+i%7)), debit("b-"+m, m, 2))
	}
	if err := s.Commit(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := fmt.Sprintf("m-%03d", i)
		if b := balanceOf(t, s, m); b.Debited != int64(3+i%7) {
			t.Fatalf("%s debited %d, want %d", m, b.Debited, 3+i%7)
		}
	}
	checkBalancesMatchLedger(t, s)

	rows = nil
	for i := range n {
		m := fmt.Sprintf("m-%03d", i)
		amount := int64(1)
		if i == 150 || i == 220 {
			amount = 1000 // more than they have
		}
		rows = append(rows, debit("c-"+m, m, amount))
	}
	err := s.Commit(ctx, rows)
	var ge *ledger.GuardError
	if !errors.As(err, &ge) || ge.MerchantID != "m-150" || ge.Amount != 1000 {
		t.Fatalf("Commit = %v, want a *GuardError for m-150", err)
	}
	if ex, err := s.ExistingEvents(ctx, []string{"c-m-000", "c-m-299"}); err != nil || len(ex) != 0 {
		t.Fatalf("rows of a refused batch: %v, %v", ex, err)
	}
	if b := balanceOf(t, s, "m-000"); b.Debited != 3 {
		t.Fatalf("m-000 debited %d after a refused batch, want 3", b.Debited)
	}
	checkBalancesMatchLedger(t, s)
}

// The guarded UPDATE reads and locks only the batch's rows through the
// primary key. Without the hint, a batch naming a good share of the table
// would scan the whole index and, at REPEATABLE READ, lock every row it read.
func TestBalanceMoveUsesPrimaryKeyRange(t *testing.T) {
	s, db := newStore(t)
	var values []string
	for i := range 1000 {
		values = append(values, fmt.Sprintf("('m-%04d', 1000)", i))
	}
	if _, err := db.SQL.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES " + strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec("ANALYZE TABLE merchant_balance"); err != nil {
		t.Fatal(err)
	}
	var merchants []string
	debits := map[string]int64{}
	for i := 0; i < 1000; i += 4 {
		m := fmt.Sprintf("m-%04d", i)
		merchants = append(merchants, m)
		debits[m] = 3
	}
	sql, args := balanceMove(merchants, debits, debits)
	for _, plan := range explain(t, s, sql, args) {
		if plan["type"] != "range" || plan["key"] != "PRIMARY" {
			t.Fatalf("plan %v, want a range on PRIMARY", plan)
		}
	}
}

// explain is MySQL's plan of query, a row per table, by column.
func explain(t *testing.T, s *Store, query string, args []any) []map[string]string {
	t.Helper()
	var plans []map[string]string
	err := s.query(t.Context(), s.db, "EXPLAIN "+query, args, func(rows *sql.Rows) error {
		cols, err := rows.Columns()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err == nil {
			err = rows.Scan(ptrs...)
		}
		plan := map[string]string{}
		for i, c := range cols {
			plan[c] = vals[i].String
		}
		plans = append(plans, plan)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return plans
}

// refusedGuard names the first merchant, in merchant order, that cannot cover
// its debit or has no balance row; nil when every one can (a balance raised
// since the UPDATE: Commit then tries again).
func TestRefusedGuard(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 5)
	grant(t, s, "m-b", 5)
	tests := []struct {
		name   string
		debits map[string]int64
		want   *ledger.GuardError
	}{
		{"all covered", map[string]int64{"m-a": 5, "m-b": 1}, nil},
		{"rejections only", map[string]int64{"m-a": 0, "m-zz": 0}, nil},
		{"short", map[string]int64{"m-a": 5, "m-b": 6}, &ledger.GuardError{MerchantID: "m-b", Amount: 6}},
		{"first in order", map[string]int64{"m-a": 9, "m-b": 6}, &ledger.GuardError{MerchantID: "m-a", Amount: 9}},
		{"unknown merchant", map[string]int64{"m-a": 1, "m-c": 1}, &ledger.GuardError{MerchantID: "m-c", Amount: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ms []string
			for m := range tt.debits {
				ms = append(ms, m)
			}
			slices.Sort(ms)
			got, err := s.refusedGuard(ctx, ms, tt.debits)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("refusedGuard = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
