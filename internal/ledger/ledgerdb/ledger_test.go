package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
)

// counterIDs is a test IDSource: an atomic counter.
type counterIDs struct{ n atomic.Int64 }

func (c *counterIDs) NextIDs(dst []int64) error {
	end := c.n.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

func newStore(t *testing.T) (*Store, *testenv.MySQL) {
	t.Helper()
	db := testenv.NewMySQL(t)
	s, err := New(db.SQL, &counterIDs{}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func grant(t *testing.T, s *Store, merchant string, amount int64) {
	t.Helper()
	if _, err := grantOne(s, merchant, amount, fmt.Sprintf("grant-%s-%d-%d", merchant, amount, time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
}

// grantOne grants one credit and returns its outcome, the batch error first.
func grantOne(s *Store, merchant string, amount int64, id string) (ledger.Credited, error) {
	out, err := s.Grant(context.Background(), []ledger.Credit{{ID: id, MerchantID: merchant, Amount: amount}})
	if err != nil {
		return ledger.Credited{}, err
	}
	return out[0], out[0].Err
}

func debit(event, merchant string, amount int64) ledger.Row {
	return ledger.Row{EventID: event, MerchantID: merchant, Kind: ledger.KindDebit, Amount: amount, Reason: ledger.ReasonPayment,
		PaymentID: "pay-" + event, Source: "pc", OccurredAt: time.Now().UTC()}
}

func rejected(event, merchant string, amount int64, reason string) ledger.Row {
	r := debit(event, merchant, amount)
	r.Kind, r.Reason = ledger.KindRejected, reason
	return r
}

// checkBalancesMatchLedger asserts the invariant: every balance row equals the sums of its ledger rows.
func checkBalancesMatchLedger(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	sums, err := s.sums(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bals []ledger.Balance
	if err := s.query(ctx, s.db, "SELECT "+balanceColumns+" FROM merchant_balance", nil, func(rows *sql.Rows) error {
		b, err := scanBalance(rows)
		bals = append(bals, b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range bals {
		if got := sums[b.MerchantID]; got.Credited != b.Credited || got.Debited != b.Debited {
			t.Errorf("merchant %s: balance row credited=%d debited=%d, ledger credited=%d debited=%d",
				b.MerchantID, b.Credited, b.Debited, got.Credited, got.Debited)
		}
	}
}

func balanceOf(t *testing.T, s *Store, merchant string) ledger.Balance {
	t.Helper()
	bals, err := s.Balances(context.Background(), []string{merchant})
	if err != nil {
		t.Fatal(err)
	}
	return bals[merchant]
}

func TestCommitWritesRowsAndMovesBalances(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)
	grant(t, s, "m-b", 5)

	rows := []ledger.Row{
		debit("e1", "m-b", 2),
		debit("e2", "m-a", 3),
		rejected("e3", "m-a", 50, ledger.ReasonInsufficient),
		debit("e4", "m-a", 4),
		rejected("e5", "m-zzz", 1, ledger.ReasonUnknownMerchant),
	}
	if err := s.Commit(ctx, rows); err != nil {
		t.Fatal(err)
	}
	wantAfter := map[string]*int64{"e1": ptr(3), "e2": ptr(7), "e3": ptr(7), "e4": ptr(3), "e5": nil}
	existing, err := s.ExistingEvents(ctx, []string{"e1", "e2", "e3", "e4", "e5", "e-none"})
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 5 {
		t.Fatalf("ExistingEvents found %d rows, want 5", len(existing))
	}
	for id, want := range wantAfter {
		got := existing[id].BalanceAfter
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("%s: balance_after = %v, want %v", id, deref(got), deref(want))
		}
	}
	for _, r := range rows {
		if r.ID == 0 {
			t.Errorf("%s: no id assigned", r.EventID)
		}
	}
	if b := balanceOf(t, s, "m-a"); b.Credited != 10 || b.Debited != 7 {
		t.Errorf("m-a balance = %+v, want credited 10 debited 7", b)
	}
	if b := balanceOf(t, s, "m-b"); b.Credited != 5 || b.Debited != 2 {
		t.Errorf("m-b balance = %+v, want credited 5 debited 2", b)
	}
	sums, err := s.sums(ctx, []string{"m-a", "m-zzz"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sums["m-a"]; got.Credited != 10 || got.Debited != 7 || got.Rejected != 1 {
		t.Errorf("m-a sums = %+v", got)
	}
	if got := sums["m-zzz"]; got.Credited != 0 || got.Debited != 0 || got.Rejected != 1 {
		t.Errorf("m-zzz sums = %+v", got)
	}
	checkBalancesMatchLedger(t, s)
}

func TestCommitGuardRefusesOverdraft(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 5)
	grant(t, s, "m-b", 5)

	err := s.Commit(ctx, []ledger.Row{debit("e1", "m-a", 3), debit("e2", "m-b", 4), debit("e3", "m-b", 2)})
	var ge *ledger.GuardError
	if !errors.As(err, &ge) || !errors.Is(err, ledger.ErrGuard) {
		t.Fatalf("Commit = %v, want a *GuardError", err)
	}
	if ge.MerchantID != "m-b" || ge.Amount != 6 {
		t.Errorf("guard error = %+v, want m-b 6", ge)
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 0 {
		t.Errorf("m-a debited = %d after a rolled-back batch, want 0", b.Debited)
	}
	if ex, _ := s.ExistingEvents(ctx, []string{"e1", "e2", "e3"}); len(ex) != 0 {
		t.Errorf("rows of a rolled-back batch are visible: %v", ex)
	}

	// A merchant without a balance row cannot be debited either.
	err = s.Commit(ctx, []ledger.Row{debit("e4", "m-unknown", 1)})
	if !errors.As(err, &ge) || ge.MerchantID != "m-unknown" {
		t.Fatalf("Commit for an unknown merchant = %v, want a *GuardError", err)
	}
	checkBalancesMatchLedger(t, s)
}

func TestCommitDuplicateRollsBack(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)
	if err := s.Commit(ctx, []ledger.Row{debit("e1", "m-a", 1)}); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, []ledger.Row{debit("e2", "m-a", 1), debit("e1", "m-a", 1)})
	if !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("Commit = %v, want ErrDuplicate", err)
	}
	if ex, _ := s.ExistingEvents(ctx, []string{"e2"}); len(ex) != 0 {
		t.Error("e2 was written by a failed batch")
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 1 {
		t.Errorf("debited = %d, want 1", b.Debited)
	}
	checkBalancesMatchLedger(t, s)
}

func TestCommitRefusesBadValues(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)
	bad := debit("e2", "m-a", 1)
	bad.PaymentID = strings.Repeat("x", 129)
	err := s.Commit(ctx, []ledger.Row{debit("e1", "m-a", 1), bad})
	var re *ledger.RefusedError
	if !errors.As(err, &re) || re.EventID != "e2" {
		t.Fatalf("Commit = %v, want a *RefusedError for e2", err)
	}
	if ex, _ := s.ExistingEvents(ctx, []string{"e1"}); len(ex) != 0 {
		t.Error("e1 was written by a refused batch")
	}
}

func TestCommitChunksInserts(t *testing.T) {
	db := testenv.NewMySQL(t)
	s, err := New(db.SQL, &counterIDs{}, nil, Options{InsertChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	grant(t, s, "m-a", 1000)
	var rows []ledger.Row
	for i := range 200 { // three prepared INSERTs of 64, one plain of 8
		rows = append(rows, debit(fmt.Sprintf("e%d", i), "m-a", 2))
	}
	if err := s.Commit(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 400 {
		t.Errorf("debited = %d, want 400", b.Debited)
	}
	if got := *rows[199].BalanceAfter; got != 600 {
		t.Errorf("last balance_after = %d, want 600", got)
	}
	checkBalancesMatchLedger(t, s)
}

func TestGrant(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()

	c, err := grantOne(s, "m-new", 7, "g1")
	if err != nil || c.Duplicate {
		t.Fatalf("Grant = %v, duplicate %v", err, c.Duplicate)
	}
	if row := c.Row; row.Kind != ledger.KindCredit || row.BalanceAfter == nil || *row.BalanceAfter != 7 || row.ID == 0 {
		t.Errorf("credit row = %+v", row)
	}
	if c, err = grantOne(s, "m-new", 7, "g1"); err != nil || !c.Duplicate {
		t.Fatalf("repeated Grant = %v, duplicate %v; want a duplicate", err, c.Duplicate)
	}
	if _, err := grantOne(s, "m-new", 5, "g2"); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, s, "m-new"); b.Credited != 12 || b.Debited != 0 {
		t.Errorf("balance = %+v, want credited 12", b)
	}

	if err := s.Commit(ctx, []ledger.Row{debit("e1", "m-new", 1)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, merchant, id string
		amount             int64
	}{
		{"other amount", "m-new", "g1", 8},
		{"other merchant", "m-other", "g1", 7},
		{"a payment's id", "m-new", "e1", 1},
	} {
		if _, err := grantOne(s, tc.merchant, tc.amount, tc.id); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("%s: Grant = %v, want ErrConflict", tc.name, err)
		}
	}
	if _, err := grantOne(s, "m-new", 0, "g3"); !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("Grant of 0 = %v, want ErrRefused", err)
	}
	if b := balanceOf(t, s, "m-new"); b.Credited != 12 || b.Debited != 1 {
		t.Errorf("balance = %+v, want credited 12 debited 1", b)
	}
	checkBalancesMatchLedger(t, s)
}

// TestGrantBatch records a batch with repeats, a conflict within the batch and
// one against an earlier grant, several merchants and a refused value, in one
// call: each credit's outcome is its own, and each id has one row.
func TestGrantBatch(t *testing.T) {
	s, _ := newStore(t)
	if _, err := grantOne(s, "m-b", 4, "old"); err != nil {
		t.Fatal(err)
	}
	out, err := s.Grant(context.Background(), []ledger.Credit{
		{ID: "g1", MerchantID: "m-a", Amount: 10, Source: "plans"},
		{ID: "g2", MerchantID: "m-b", Amount: 3},
		{ID: "g1", MerchantID: "m-a", Amount: 10},
		{ID: "g1", MerchantID: "m-a", Amount: 11},
		{ID: "old", MerchantID: "m-b", Amount: 5},
		{ID: "old", MerchantID: "m-b", Amount: 4},
		{ID: "g3", MerchantID: "m-a", Amount: 0},
		{ID: "g4", MerchantID: "m-a", Amount: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		dup      bool
		err      error
		id       string
		balAfter int64
	}{
		{false, nil, "g1", 10}, {false, nil, "g2", 7}, {true, nil, "g1", 10}, {false, ledger.ErrConflict, "g1", 10},
		{false, ledger.ErrConflict, "old", 4}, {true, nil, "old", 4}, {false, ledger.ErrRefused, "g3", -1}, {false, nil, "g4", 15},
	}
	for i, w := range want {
		got := out[i]
		if got.Duplicate != w.dup || !errors.Is(got.Err, w.err) || (w.err == nil) != (got.Err == nil) || got.Row.EventID != w.id {
			t.Errorf("credit %d: %+v, want duplicate %v, err %v, row %s", i, got, w.dup, w.err, w.id)
		}
		if w.balAfter >= 0 && (got.Row.BalanceAfter == nil || *got.Row.BalanceAfter != w.balAfter || got.Row.ID == 0) {
			t.Errorf("credit %d: row %+v, want balance_after %d", i, got.Row, w.balAfter)
		}
	}
	if out[0].Row.Source != "plans" {
		t.Errorf("source = %q, want plans", out[0].Row.Source)
	}
	if b := balanceOf(t, s, "m-a"); b.Credited != 15 {
		t.Errorf("m-a credited = %d, want 15", b.Credited)
	}
	if b := balanceOf(t, s, "m-b"); b.Credited != 7 {
		t.Errorf("m-b credited = %d, want 7", b.Credited)
	}
	checkBalancesMatchLedger(t, s)
}

// TestCommitRetriesDeadlock makes Commit the victim of a real InnoDB deadlock:
// another, heavier transaction holds m-b and then asks for m-a, which Commit
// already locked. Commit must retry and succeed once the other one commits.
// TestCommitRetriesDeadlock: the deadlock victim is tried again, with fresh
// row ids (an id is never older than its transaction: see MaxTxAge).
func TestCommitRetriesDeadlock(t *testing.T) {
	db := testenv.NewMySQL(t)
	ids := &countingIDs{}
	s, err := New(db.SQL, ids, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	grant(t, s, "m-a", 10)
	grant(t, s, "m-b", 10)

	other, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	// Weight: InnoDB rolls back the transaction that changed fewer rows.
	for i := range 50 {
		if _, err := other.ExecContext(ctx, "INSERT INTO merchant_balance (merchant_id) VALUES (?)", fmt.Sprintf("heavy-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.ExecContext(ctx, "SELECT * FROM merchant_balance WHERE merchant_id = 'm-b' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Commit(ctx, []ledger.Row{debit("e1", "m-a", 1), debit("e2", "m-b", 1)}) }()

	waitForLockWait(t, db)
	// Now close the cycle: Commit holds m-a and waits for m-b; we ask for m-a.
	if _, err := other.ExecContext(ctx, "UPDATE merchant_balance SET credited = credited + 1 WHERE merchant_id = 'm-a'"); err != nil {
		t.Fatalf("the heavy transaction was chosen as the deadlock victim (%v); the test needs Commit to be", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Commit after a deadlock = %v", err)
	}
	if n := counterValue(t, s.metrics.deadlockRetries); n < 1 {
		t.Errorf("deadlock retries = %v, want >= 1", n)
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 1 || b.Credited != 11 {
		t.Errorf("m-a = %+v", b)
	}
	rows, err := s.ExistingEvents(ctx, []string{"e1", "e2"})
	if err != nil {
		t.Fatal(err)
	}
	if n := ids.calls.Load(); n < 4 { // two grants, then one call per Commit attempt
		t.Errorf("%d calls for ids, want one per attempt (>= 4)", n)
	}
	last := 1_000_000 + ids.next.Load() // the newest id issued
	if rows["e1"].ID != last-1 || rows["e2"].ID != last {
		t.Errorf("row ids %d, %d; want the last attempt's %d, %d", rows["e1"].ID, rows["e2"].ID, last-1, last)
	}
}

func waitForLockWait(t *testing.T, db *testenv.MySQL) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id IN (SELECT id FROM information_schema.processlist WHERE db = ?)", db.Name).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		// INFORMATION_SCHEMA.INNODB_TRX is a cache that InnoDB refreshes
		// only when it was last read more than 100ms ago: polling faster
		// would freeze it before the wait shows.
		time.Sleep(150 * time.Millisecond)
	}
	t.Fatal("Commit never waited for the row lock")
}

func ptr(v int64) *int64 { return &v }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
