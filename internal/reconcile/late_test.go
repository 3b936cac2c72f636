package reconcile

import (
	"reflect"
	"testing"
	"time"
)

// commitDebit books a debit row with the given id and its balance update in
// one transaction, as the ledger writer does.
func (e *env) commitDebit(id int64, eventID, m string, amount int64) {
	e.t.Helper()
	tx, err := e.my.SQL.BeginTx(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(e.ctx, `INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, occurred_at)
		VALUES (?,?,?,'debit',?,NOW(6))`, id, eventID, m, amount); err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.ExecContext(e.ctx, "UPDATE merchant_balance SET debited = debited + ? WHERE merchant_id = ?", amount, m); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

// A commit that lands after a pass, with an id older than rows that pass saw
// but no older than a ledger transaction may be, is no finding: the pass did
// not checkpoint past it. The merchant keeps being repaired.
func TestLateCommitIsNoFinding(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.merchant("m-1", 100, 30) // an hour old: settled
	e.commitDebit(e.sfID(now.Add(-maxTxAge/4)), "evt-recent", "m-1", 5)
	e.setQuota("m-1", 65, 1)
	// A tiny Settle: only the ledger's own bound keeps the checkpoint back.
	r, _ := e.reconciler(Config{Settle: time.Millisecond})
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("consistent ledger: %+v", rep.Findings)
	}
	if cp := e.checkpointOf("m-1"); cp.Debited != 30 {
		t.Fatalf("checkpoint %+v passed a row younger than maxTxAge", cp)
	}

	// Ids taken before evt-recent's, committed now: a slow transaction.
	e.commitDebit(e.sfID(now.Add(-maxTxAge/2)), "evt-late", "m-1", 4)
	for pass, remain := range []int64{50, 70} { // 61 is right: drift both ways
		e.setQuota("m-1", remain, 1)
		rep := mustRun(t, r)
		kind := "m-1 redis_low"
		if remain > 61 {
			kind = "m-1 redis_high"
		}
		if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{kind: ActionRepaired}) {
			t.Fatalf("pass %d after the late commit: %+v", pass, rep.Findings)
		}
		if q := e.quota("m-1"); q["remain"] != "61" {
			t.Fatalf("pass %d: remain %s, want 61", pass, q["remain"])
		}
	}
}

// A row below the checkpoint that is older than any ledger transaction may be
// (no writer can produce it) is still found: the audit keeps its teeth.
func TestCommitOlderThanTxAgeIsFound(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.merchant("m-1", 100, 30)
	// Just old enough to be settled, with a tiny Settle.
	e.commitDebit(e.sfID(now.Add(-maxTxAge-slack-2*time.Second)), "evt-settled", "m-1", 5)
	e.setQuota("m-1", 65, 1)
	r, _ := e.reconciler(Config{Settle: time.Millisecond})
	mustRun(t, r)
	if cp := e.checkpointOf("m-1"); cp.Debited != 35 {
		t.Fatalf("checkpoint %+v, want it past evt-settled", cp)
	}

	e.commitDebit(e.sfID(now.Add(-maxTxAge-slack-3*time.Second)), "evt-too-late", "m-1", 4)
	e.setQuota("m-1", 61, 1)
	for pass := range 2 {
		rep := mustRun(t, r)
		if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-1 ledger_mismatch": ActionReported}) {
			t.Fatalf("pass %d: %+v", pass, rep.Findings)
		}
	}
}

// A checkpoint beyond the bound (left by an older version, or by a reconciler
// run with a shorter settle) is not built on, so a late commit below it is no
// finding either; the merchant is summed from its first row and the checkpoint
// rewritten below the bound.
func TestStaleCheckpointIsRecounted(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.merchant("m-1", 100, 30)
	recent := e.sfID(now.Add(-maxTxAge / 4))
	e.commitDebit(recent, "evt-recent", "m-1", 5)
	e.exec("INSERT INTO reconcile_checkpoints (merchant_id, last_ledger_id, credited, debited) VALUES ('m-1', ?, 100, 35)", recent)
	e.commitDebit(e.sfID(now.Add(-maxTxAge/2)), "evt-late", "m-1", 4)
	e.setQuota("m-1", 50, 1)

	r, _ := e.reconciler(Config{Settle: time.Millisecond})
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-1 redis_low": ActionRepaired}) {
		t.Fatalf("stale checkpoint: %+v", rep.Findings)
	}
	if cp := e.checkpointOf("m-1"); cp.LastID >= recent || cp.Credited != 100 || cp.Debited != 30 {
		t.Fatalf("checkpoint %+v not rewritten below the bound", cp)
	}
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("second pass: %+v", rep.Findings)
	}
}
