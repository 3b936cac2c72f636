package reconcile

import (
	"reflect"
	"strconv"
	"testing"
	"time"
)

// Every repairable kind of drift is found and repaired exactly once: the second
// run finds nothing, and the state is exact.
func TestRepairsEachKindOnce(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	old, young := now.Add(-10*time.Minute), now.Add(-5*time.Second)
	for _, m := range []string{"m-clean", "m-high", "m-low", "m-missing", "m-leftover", "m-orphan", "m-young", "m-stale", "m-mixed"} {
		e.merchant(m, 100, 30)
	}
	e.setQuota("m-clean", 70, 1)
	e.setQuota("m-high", 85, 4)                                                  // overdraft risk
	e.setQuota("m-low", 61, 4)                                                   // under-reporting
	e.setQuota("m-orphan", 65, 2, "evt-orphan", 5, old)                          // deducted, never booked
	e.setQuota("m-young", 62, 2, "evt-young1", 5, young, "evt-young2", 3, young) // in flight: not drift
	e.debit("m-stale", "evt-stale", 5, old)
	e.setQuota("m-stale", 65, 3, "evt-stale", 5, old) // booked, confirm never ran
	e.setQuota("m-mixed", 90, 7, "evt-mix-orphan", 4, old, "evt-mix-young", 6, young)
	// A hash without remain is missing to the worker too; hydration drops the rest.
	if err := e.redis.Client.HSet(e.ctx, e.redis.Keys.Quota("m-leftover"), "p:evt-left", "3:1700000000000").Err(); err != nil {
		t.Fatal(err)
	}

	r, _ := e.reconciler(Config{})
	rep := mustRun(t, r)
	got := byMerchant(rep.Findings)
	want := map[string]Action{
		"m-high redis_high": ActionRepaired, "m-low redis_low": ActionRepaired, "m-missing missing_key": ActionRepaired, "m-leftover missing_key": ActionRepaired,
		"m-orphan orphan_pending": ActionRepaired, "m-stale stale_pending": ActionRepaired,
		"m-mixed redis_high": ActionRepaired, "m-mixed orphan_pending": ActionRepaired,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %v\nwant %v", sortedKeys(got), sortedKeys(want))
	}
	// The two missing hashes are hydrated, reported, and not drift.
	if rep.Status != StatusRepaired || rep.Checked != 9 || rep.Clean != 4 || rep.Drifted != 5 ||
		rep.Repaired != 5 || rep.Hydrated != 2 || rep.Busy != 0 || rep.LedgerAudited != 9 {
		t.Fatalf("report %+v", rep)
	}
	// |+15| + |-9| + |-5| + (m-mixed: drift 90-(70-10)=+30, orphan -4)
	if rep.AbsDrift != 15+9+5+30+4 {
		t.Fatalf("abs drift %d", rep.AbsDrift)
	}
	wantState := map[string]map[string]string{
		"m-clean":  {"remain": "70", "ver": "1"},
		"m-high":   {"remain": "70", "ver": "5"},
		"m-low":    {"remain": "70", "ver": "5"},
		"m-orphan": {"remain": "70", "ver": "3"},
		"m-young":  e.quota("m-young"), // untouched, checked below
		"m-stale":  {"remain": "65", "ver": "4"},
		"m-mixed":  {"remain": "64", "ver": "8", "p:evt-mix-young": "6:" + strconv.FormatInt(young.UnixMilli(), 10)},
	}
	for m, w := range wantState {
		if got := e.quota(m); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %v, want %v", m, got, w)
		}
	}
	for _, m := range []string{"m-missing", "m-leftover"} {
		if q := e.quota(m); q["remain"] != "70" || len(q) != 2 || q["ver"] < strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10) {
			t.Errorf("%s hydrated as %v", m, q)
		}
	}
	if y := e.quota("m-young"); y["remain"] != "62" || y["ver"] != "2" || len(y) != 4 {
		t.Errorf("in-flight merchant touched: %v", y)
	}

	stored := e.auditFindings(rep.RunID)
	if len(stored) != len(rep.Findings) {
		t.Fatalf("stored %d findings, reported %d", len(stored), len(rep.Findings))
	}
	for _, f := range stored {
		if f.MerchantID == "m-high" && (f.RedisValue == nil || *f.RedisValue != 85 || f.Expected != 70 || f.Delta != 15 || f.Action != ActionRepaired) {
			t.Errorf("stored m-high finding %+v", f)
		}
		if f.MerchantID == "m-missing" && f.RedisValue != nil {
			t.Errorf("missing key stored with a redis value: %+v", f)
		}
	}
	if n := e.count("SELECT COUNT(*) FROM reconcile_runs WHERE id = ? AND status = 'repaired' AND merchants_checked = 9 AND repaired = 5 AND NOT dry_run", rep.RunID); n != 1 {
		t.Fatalf("run row missing or wrong (%d)", n)
	}

	again := mustRun(t, r)
	if len(again.Findings) != 0 || again.Status != StatusClean || again.Clean != 9 {
		t.Fatalf("second run: %+v", again)
	}
	if n := e.count("SELECT COUNT(*) FROM reconcile_runs"); n != 2 {
		t.Fatalf("%d run rows, want 2", n)
	}
}

// Critical findings are reported on every run and never repaired; a merchant
// with one keeps its Redis state for a person to judge.
func TestCriticalFindingsAreNeverRepaired(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-mismatch", 100, 30)
	e.exec("UPDATE merchant_balance SET credited = 120 WHERE merchant_id = 'm-mismatch'") // no ledger row for +20
	e.setQuota("m-mismatch", 70, 1)                                                       // drift against the balance row: held
	e.merchant("m-ceiling", 5_000, 0)
	e.setQuota("m-ceiling", 10, 1)
	e.merchant("m-malformed", 10, 0)
	if err := e.redis.Client.HSet(e.ctx, e.redis.Keys.Quota("m-malformed"), "remain", "ten", "ver", 1).Err(); err != nil {
		t.Fatal(err)
	}
	negativeBalance(t, e, "m-negative", 10, 20)

	before := e.dumpRedis()
	r, _ := e.reconciler(Config{RepairCeiling: 1000})
	for run := 0; run < 2; run++ {
		rep := mustRun(t, r)
		got := byMerchant(rep.Findings)
		want := map[string]Action{
			"m-mismatch ledger_mismatch": ActionReported, "m-mismatch redis_low": ActionReported,
			"m-ceiling redis_low": ActionOverCeiling, "m-malformed malformed": ActionReported,
			"m-negative negative_balance": ActionReported, "m-negative missing_key": ActionReported,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: findings %v\nwant %v", run, sortedKeys(got), sortedKeys(want))
		}
		if rep.Status != StatusDrift || rep.Repaired != 0 || rep.Drifted != 4 {
			t.Fatalf("run %d: report %+v", run, rep)
		}
	}
	if after := e.dumpRedis(); !reflect.DeepEqual(before, after) {
		t.Fatalf("Redis changed:\nbefore %v\nafter  %v", before, after)
	}
}

// negativeBalance stores credited < debited for a merchant of the default
// policy (reject): a balance only a person (or a bug) could have written.
func negativeBalance(t *testing.T, e *env, m string, credited, debited int64) {
	t.Helper()
	e.merchant(m, credited, debited)
}

// --dry-run writes the audit trail and nothing in Redis.
func TestDryRunChangesNothingInRedis(t *testing.T) {
	e := newEnv(t)
	old := time.Now().Add(-time.Hour)
	for _, m := range []string{"m-high", "m-missing", "m-orphan"} {
		e.merchant(m, 50, 10)
	}
	e.setQuota("m-high", 45, 1)
	e.setQuota("m-orphan", 37, 1, "evt-o", 3, old)
	before := e.dumpRedis()

	r, _ := e.reconciler(Config{DryRun: true})
	rep := mustRun(t, r)
	if after := e.dumpRedis(); !reflect.DeepEqual(before, after) {
		t.Fatalf("dry run changed Redis:\nbefore %v\nafter  %v", before, after)
	}
	want := map[string]Action{"m-high redis_high": ActionDryRun, "m-missing missing_key": ActionDryRun, "m-orphan orphan_pending": ActionDryRun}
	if got := byMerchant(e.auditFindings(rep.RunID)); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored findings %v", got)
	}
	if rep.Status != StatusDrift || !rep.DryRun || rep.Repaired != 0 {
		t.Fatalf("report %+v", rep)
	}
	if n := e.count("SELECT COUNT(*) FROM reconcile_runs WHERE id = ? AND dry_run AND status = 'drift' AND drifted = 2", rep.RunID); n != 1 {
		t.Fatal("dry run row missing")
	}
}

// Only the named merchants are checked.
func TestMerchantFilter(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-a", 10, 0)
	e.merchant("m-b", 10, 0)
	e.setQuota("m-a", 9, 1)
	e.setQuota("m-b", 9, 1)
	r, _ := e.reconciler(Config{Merchants: []string{"m-b", "m-nobody", "m-b"}})
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, map[string]Action{"m-b redis_low": ActionRepaired}) {
		t.Fatalf("findings %v", got)
	}
	if !reflect.DeepEqual(rep.Unknown, []string{"m-nobody"}) || rep.Checked != 1 {
		t.Fatalf("report %+v", rep)
	}
	if e.quota("m-a")["remain"] != "9" {
		t.Fatal("merchant outside the filter repaired")
	}
}
