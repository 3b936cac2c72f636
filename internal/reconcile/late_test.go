package reconcile

import (
	"reflect"
	"testing"
	"time"
)

// A commit that lands after a pass, with an id older than every row that
// pass saw (ids taken before a slow transaction's lock, or on a clock behind),
// is counted by the next incremental pass: checkpoints follow the ledger's
// seq, which is commit order, not ids.
func TestOlderIDCommittedLaterIsCounted(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.merchant("m-1", 100, 30)
	e.debit("m-1", "evt-recent", 5, now)
	e.setQuota("m-1", 65, 1)
	r, _ := e.reconciler(Config{})
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("consistent ledger: %+v", rep.Findings)
	}
	if cp := e.checkpointOf("m-1"); cp != (cpRow{3, 100, 35}) {
		t.Fatalf("checkpoint %+v, want every row (seq 3)", cp)
	}

	e.debit("m-1", "evt-late", 4, now.Add(-time.Hour)) // an old id, committed now
	for pass, remain := range []int64{50, 70} {        // 61 is right: drift both ways
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
	if cp := e.checkpointOf("m-1"); cp != (cpRow{4, 100, 39}) {
		t.Fatalf("checkpoint %+v, want it past evt-late (seq 4)", cp)
	}
}

// A checkpoint beyond the merchant's last seq (a restored or hand-edited
// database) is not built on: the merchant is summed from its first row and
// the checkpoint rewritten.
func TestStaleCheckpointIsRecounted(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-1", 100, 30)
	e.exec("INSERT INTO reconcile_checkpoints (merchant_id, last_seq, credited, debited) VALUES ('m-1', 9, 100, 90)")
	e.setQuota("m-1", 50, 1)

	r, _ := e.reconciler(Config{})
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-1 redis_low": ActionRepaired}) {
		t.Fatalf("stale checkpoint: %+v", rep.Findings)
	}
	if cp := e.checkpointOf("m-1"); cp != (cpRow{2, 100, 30}) {
		t.Fatalf("checkpoint %+v not rewritten from the ledger", cp)
	}
	if rep := mustRun(t, r); len(rep.Findings) != 0 {
		t.Fatalf("second pass: %+v", rep.Findings)
	}
}
