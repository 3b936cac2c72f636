package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// Every merchant, also one without rows, comes once with its rows in seq
// order, page after page; a listed merchant without a balance row is
// refused; and a page's rows are ordered ranges of (merchant_id, seq), no
// sort of the table.
func TestReadStatements(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	for m := range 5 {
		grant(t, s, fmt.Sprintf("m-%d", m), 10)
		if err := s.Commit(ctx, []ledger.Row{debit(fmt.Sprintf("e-%d", m), fmt.Sprintf("m-%d", m), 3),
			rejected(fmt.Sprintf("r-%d", m), fmt.Sprintf("m-%d", m), 30, ledger.ReasonInsufficient)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SQL.Exec("INSERT INTO merchant_balance (merchant_id) VALUES ('m-2a')"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{rejected("u-1", "m-unknown", 1, ledger.ReasonUnknownMerchant)}); err != nil {
		t.Fatal(err)
	}
	read := func(merchants []string) (string, error) {
		var b strings.Builder
		var asOf time.Time
		err := ReadStatements(ctx, s.db, merchants, 2, StatementVisitor{
			Start:    func(at time.Time) error { asOf = at; return nil },
			Merchant: func(bal ledger.Balance) error { fmt.Fprintf(&b, "%s:", bal.MerchantID); return nil },
			Row:      func(r *ledger.Row) error { fmt.Fprintf(&b, "%d%s ", *r.Seq, r.Kind[:1]); return nil },
		})
		if err == nil && time.Since(asOf).Abs() > time.Minute {
			t.Errorf("snapshot time %v", asOf)
		}
		return b.String(), err
	}
	got, err := read(nil)
	if want := "m-0:1c 2d 3r m-1:1c 2d 3r m-2:1c 2d 3r m-2a:m-3:1c 2d 3r m-4:1c 2d 3r "; err != nil || got != want {
		t.Fatalf("all merchants: %q, %v; want %q", got, err, want)
	}
	got, err = read([]string{"m-4", "m-2a", "m-1", "m-4"})
	if want := "m-1:1c 2d 3r m-2a:m-4:1c 2d 3r "; err != nil || got != want {
		t.Fatalf("listed merchants: %q, %v; want %q", got, err, want)
	}
	if _, err = read([]string{"m-1", "m-unknown"}); !errors.Is(err, ledger.ErrUnknownMerchant) || !strings.Contains(err.Error(), "m-unknown") {
		t.Fatalf("an unknown merchant listed: %v", err)
	}

	if _, err := s.db.Exec("ANALYZE TABLE quota_ledger"); err != nil {
		t.Fatal(err)
	}
	// The programs' pools send values in the SQL text (dial.MySQL), which
	// MariaDB plans differently from a prepared statement's.
	cfg, err := mysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	pool, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	interpolating, err := New(pool, &counterIDs{}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	listed := make([]string, maxListedPage)
	for i := range listed {
		listed[i] = fmt.Sprintf("m-%d", i)
	}
	in, args := sqltx.InList(listed)
	for q, args := range map[string][]any{
		statementRowsSQL("merchant_id BETWEEN ? AND ?"): {"m-1", "m-3"},
		statementRowsSQL("merchant_id IN (" + in + ")"): args,
	} {
		plan := explain(t, interpolating, q, args)
		if len(plan) != 1 || plan[0]["key"] != "quota_ledger_merchant_seq" || plan[0]["type"] != "range" || strings.Contains(plan[0]["Extra"], "filesort") {
			t.Fatalf("EXPLAIN %.200s: %+v, want ranges of quota_ledger_merchant_seq, no filesort", q, plan)
		}
	}
}
