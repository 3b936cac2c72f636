package reconcile

import (
	"reflect"
	"testing"
)

// The reconciler reads each merchant's overdraft policy: a balance below zero
// within the policy is no finding, drift around it is repaired to it, a
// missing hash is hydrated with the policy's floor, and only a balance below
// what the policy allows is critical (reported on every run, never repaired).
func TestOverdraftPoliciesAreKnown(t *testing.T) {
	e := newEnv(t)
	floor := func(m string, credited, debited, n int64) {
		e.merchant(m, credited, debited)
		e.exec("UPDATE merchant_balance SET overdraft_policy = 'floor', overdraft_floor = ? WHERE merchant_id = ?", n, m)
	}
	floor("m-floor", 100, 150, 60)
	floor("m-floor-high", 100, 150, 60)
	floor("m-floor-missing", 100, 150, 60)
	floor("m-below", 10, 25, 10)
	e.merchant("m-over-missing", 10, 900)
	e.exec("UPDATE merchant_balance SET overdraft_policy = 'overage' WHERE merchant_id = 'm-over-missing'")
	hash := func(m string, remain int64, floor string) {
		if err := e.redis.Client.HSet(e.ctx, e.redis.Keys.Quota(m), "remain", remain, "ver", 3, "floor", floor).Err(); err != nil {
			t.Fatal(err)
		}
	}
	hash("m-floor", -50, "60")
	hash("m-floor-high", -40, "60")
	hash("m-below", -10, "10")

	r, _ := e.reconciler(Config{})
	want := map[string]Action{
		"m-floor-high redis_high": ActionRepaired, "m-floor-missing missing_key": ActionRepaired,
		"m-over-missing missing_key": ActionRepaired,
		// -10 in Redis against -15 in MySQL: below the floor, so held, not repaired.
		"m-below negative_balance": ActionReported, "m-below redis_high": ActionReported,
	}
	rep := mustRun(t, r)
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %v\nwant %v", sortedKeys(got), sortedKeys(want))
	}
	for m, w := range map[string][2]string{
		"m-floor": {"-50", "60"}, "m-floor-high": {"-50", "60"}, "m-floor-missing": {"-50", "60"},
		"m-over-missing": {"-890", "inf"}, "m-below": {"-10", "10"},
	} {
		if q := e.quota(m); q["remain"] != w[0] || q["floor"] != w[1] {
			t.Errorf("%s = %v, want remain %s and floor %s", m, q, w[0], w[1])
		}
	}
	again := mustRun(t, r)
	if got := byMerchant(again.Findings); !reflect.DeepEqual(got, map[string]Action{"m-below negative_balance": ActionReported, "m-below redis_high": ActionReported}) {
		t.Fatalf("second run: findings %v", sortedKeys(got))
	}
}
