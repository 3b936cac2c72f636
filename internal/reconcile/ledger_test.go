package reconcile

import (
	"reflect"
	"testing"
	"time"
)

type cpRow struct{ LastSeq, Credited, Debited int64 }

func (e *env) checkpointOf(m string) cpRow {
	e.t.Helper()
	var c cpRow
	err := e.my.SQL.QueryRowContext(e.ctx, "SELECT last_seq, credited, debited FROM reconcile_checkpoints WHERE merchant_id = ?", m).
		Scan(&c.LastSeq, &c.Credited, &c.Debited)
	if err != nil {
		e.t.Fatalf("checkpoint of %s: %v", m, err)
	}
	return c
}

// The ledger audit folds every row it saw into the checkpoint, sums only
// newer rows the next run, and finds a mismatch in them.
func TestLedgerAuditIsIncremental(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.exec("INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES ('m-1', 0, 0)")
	e.ledger(e.sfID(now.Add(-time.Hour)), "grant-1", "m-1", "credit", 100)
	e.ledger(e.sfID(now.Add(-time.Hour)), "rej-1", "m-1", "rejected", 500) // moves nothing
	e.ledger(e.sfID(now.Add(-30*time.Minute)), "evt-1", "m-1", "debit", 10)
	e.ledger(e.sfID(now), "evt-2", "m-1", "debit", 5)
	e.exec("UPDATE merchant_balance SET credited = 100, debited = 15 WHERE merchant_id = 'm-1'")
	e.setQuota("m-1", 85, 1)

	r, _ := e.reconciler(Config{})
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("consistent ledger: %+v", rep.Findings)
	}
	if cp := e.checkpointOf("m-1"); cp != (cpRow{4, 100, 15}) {
		t.Fatalf("checkpoint %+v, want {4 100 15}", cp)
	}

	// A new debit row without its balance update (the rows and the totals
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

// A row changed below the checkpoint (by hand: no writer rewrites the
// ledger) is missed by the incremental audit, which shows the balance row's
// move as a mismatch; a LedgerFull run recounts everything and rewrites the
// checkpoint.
func TestLedgerFullRecountsCheckpoints(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 100, 30)
	e.setQuota("m-1", 70, 1)
	r, _ := e.reconciler(Config{})
	mustRun(t, r)
	cp := e.checkpointOf("m-1")

	e.exec("UPDATE quota_ledger SET amount = amount + 4 WHERE event_id = 'evt-old-m-1'")
	e.exec("UPDATE merchant_balance SET debited = debited + 4 WHERE merchant_id = 'm-1'")
	e.setQuota("m-1", 66, 1)
	if rep := mustRun(t, r); !reflect.DeepEqual(byMerchant(rep.Findings), map[string]Action{"m-1 ledger_mismatch": ActionReported}) {
		t.Fatalf("changed row: %+v", rep.Findings)
	}

	full, _ := e.reconciler(Config{LedgerFull: true})
	if rep := mustRun(t, full); len(rep.Findings) != 0 {
		t.Fatalf("full audit: %+v", rep.Findings)
	}
	if got := e.checkpointOf("m-1"); got != (cpRow{cp.LastSeq, 100, 34}) {
		t.Fatalf("rewritten checkpoint %+v", got)
	}
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("incremental after full: %+v", rep.Findings)
	}
}

// An older checkpoint never overwrites a newer one (two reconcilers racing),
// unless forced (LedgerFull, or a stale checkpoint).
func TestCheckpointsNeverMoveBack(t *testing.T) {
	e := newEnv(t)
	save := func(cp checkpoint, forced bool) {
		t.Helper()
		if err := saveCheckpoints(e.ctx, e.my.SQL, map[string]checkpoint{"m-1": cp}, forced); err != nil {
			t.Fatal(err)
		}
	}
	save(checkpoint{LastSeq: 50, Credited: 9, Debited: 1}, false)
	save(checkpoint{LastSeq: 40, Credited: 7, Debited: 1}, false)
	if got := e.checkpointOf("m-1"); got != (cpRow{50, 9, 1}) {
		t.Fatalf("checkpoint moved back: %+v", got)
	}
	save(checkpoint{LastSeq: 60, Credited: 12, Debited: 2}, false)
	if got := e.checkpointOf("m-1"); got != (cpRow{60, 12, 2}) {
		t.Fatalf("checkpoint not advanced: %+v", got)
	}
	save(checkpoint{LastSeq: 30, Credited: 5, Debited: 1}, true)
	if got := e.checkpointOf("m-1"); got != (cpRow{30, 5, 1}) {
		t.Fatalf("forced checkpoint not written: %+v", got)
	}
}
