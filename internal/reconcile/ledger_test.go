package reconcile

import (
	"reflect"
	"testing"
	"time"
)

type cpRow struct{ LastID, Credited, Debited int64 }

func (e *env) checkpointOf(m string) cpRow {
	e.t.Helper()
	var c cpRow
	err := e.my.SQL.QueryRowContext(e.ctx, "SELECT last_ledger_id, credited, debited FROM reconcile_checkpoints WHERE merchant_id = ?", m).
		Scan(&c.LastID, &c.Credited, &c.Debited)
	if err != nil {
		e.t.Fatalf("checkpoint of %s: %v", m, err)
	}
	return c
}

// The ledger audit folds only settled rows into the checkpoint, sums newer
// rows afresh each run, and finds a mismatch in either.
func TestLedgerAuditIsIncremental(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.exec("INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES ('m-1', 0, 0)")
	oldCredit := e.sfID(now.Add(-time.Hour))
	e.ledger(oldCredit, "grant-1", "m-1", "credit", 100)
	e.ledger(e.sfID(now.Add(-time.Hour)), "rej-1", "m-1", "rejected", 500) // moves nothing
	oldDebit := e.sfID(now.Add(-30 * time.Minute))
	e.ledger(oldDebit, "evt-1", "m-1", "debit", 10)
	e.ledger(e.sfID(now), "evt-2", "m-1", "debit", 5) // younger than Settle: never checkpointed
	e.exec("UPDATE merchant_balance SET credited = 100, debited = 15 WHERE merchant_id = 'm-1'")
	e.setQuota("m-1", 85, 1)

	r, _ := e.reconciler(Config{Settle: time.Minute})
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("consistent ledger: %+v", rep.Findings)
	}
	// The rejected row's id is after the credit's: the checkpoint covers up to the old debit.
	if cp := e.checkpointOf("m-1"); cp != (cpRow{oldDebit, 100, 10}) {
		t.Fatalf("checkpoint %+v, want {%d 100 10}", cp, oldDebit)
	}

	// A fresh debit row without its balance update (the rows and the totals
	// must move together) is a mismatch.
	e.ledger(e.sfID(now), "evt-3", "m-1", "debit", 7)
	rep := mustRun(t, r)
	want := map[string]Action{"m-1 ledger_mismatch": ActionReported}
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, want) || rep.Findings[0].Delta != -7 || rep.Findings[0].Expected != 22 {
		t.Fatalf("findings %+v", rep.Findings)
	}
	if q := e.quota("m-1"); q["ver"] != "1" {
		t.Fatalf("Redis of a merchant with a critical finding was repaired: %v", q)
	}
	e.exec("UPDATE merchant_balance SET debited = 22 WHERE merchant_id = 'm-1'")
	e.setQuota("m-1", 78, 1)
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("after the balance caught up: %+v", rep.Findings)
	}
}

// A row committed with an id older than the checkpoint (older than any ledger
// transaction may be) is missed by the incremental audit and shows as a mismatch;
// a LedgerFull run recounts everything and rewrites the checkpoint.
func TestLedgerFullRecountsCheckpoints(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 100, 30)
	e.setQuota("m-1", 70, 1)
	r, _ := e.reconciler(Config{})
	mustRun(t, r)
	cp := e.checkpointOf("m-1")

	late := cp.LastID - 1<<12 // another worker's id, below the checkpoint
	e.ledger(late, "evt-late", "m-1", "debit", 4)
	e.exec("UPDATE merchant_balance SET debited = debited + 4 WHERE merchant_id = 'm-1'")
	e.setQuota("m-1", 66, 1)
	if rep := mustRun(t, r); !reflect.DeepEqual(byMerchant(rep.Findings), map[string]Action{"m-1 ledger_mismatch": ActionReported}) {
		t.Fatalf("late row: %+v", rep.Findings)
	}

	full, _ := e.reconciler(Config{LedgerFull: true})
	if rep := mustRun(t, full); len(rep.Findings) != 0 {
		t.Fatalf("full audit: %+v", rep.Findings)
	}
	if got := e.checkpointOf("m-1"); got != (cpRow{cp.LastID, 100, 34}) {
		t.Fatalf("rewritten checkpoint %+v", got)
	}
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("incremental after full: %+v", rep.Findings)
	}
}

// An older checkpoint never overwrites a newer one (two reconcilers racing),
// unless the newer one is beyond the bound (stale).
func TestCheckpointsNeverMoveBack(t *testing.T) {
	e := newEnv(t)
	save := func(cp checkpoint, bound int64) {
		t.Helper()
		if err := saveCheckpoints(e.ctx, e.my.SQL, map[string]checkpoint{"m-1": cp}, bound, false); err != nil {
			t.Fatal(err)
		}
	}
	save(checkpoint{LastID: 50, Credited: 9, Debited: 1}, 1000)
	save(checkpoint{LastID: 40, Credited: 7, Debited: 1}, 1000)
	if got := e.checkpointOf("m-1"); got != (cpRow{50, 9, 1}) {
		t.Fatalf("checkpoint moved back: %+v", got)
	}
	save(checkpoint{LastID: 60, Credited: 12, Debited: 2}, 1000)
	if got := e.checkpointOf("m-1"); got != (cpRow{60, 12, 2}) {
		t.Fatalf("checkpoint not advanced: %+v", got)
	}
	save(checkpoint{LastID: 30, Credited: 5, Debited: 1}, 59)
	if got := e.checkpointOf("m-1"); got != (cpRow{30, 5, 1}) {
		t.Fatalf("stale checkpoint kept: %+v", got)
	}
}
