package reconcile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

// A sharded merchant is compared as the sum of its shards plus pending, and
// repaired shard by shard: the young in-flight deduction stays (moved to its
// event's shard), the orphan goes, the total is MySQL's, and a second run is
// clean. A merchant with a missing shard is hydrated over all of them.
func TestShardedMerchants(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	old, young := now.Add(-10*time.Minute), now.Add(-5*time.Second)
	e.merchant("m-hot", 100, 30)
	e.merchant("m-gap", 50, 0)
	e.merchant("m-even", 40, 0)
	e.exec("INSERT INTO merchant_shards (merchant_id, shards) VALUES ('m-hot', 4), ('m-gap', 2), ('m-even', 2)")
	// m-hot: 70 available, 6 in flight (young), 4 orphaned: expected 64; the shards hold 20+20+20+9 = 69.
	e.setQuota("m-hot#0", 20, 1, "evt-young", 6, young)
	e.setQuota("m-hot#1", 20, 1, "evt-orphan", 4, old)
	e.setQuota("m-hot#2", 20, 1)
	e.setQuota("m-hot#3", 9, 1)
	e.setQuota("m-gap#0", 25, 1) // m-gap#1 missing
	e.setQuota("m-even#0", 13, 1)
	e.setQuota("m-even#1", 27, 1) // uneven but exact: not drift

	r, _ := e.reconciler(Config{})
	rep := mustRun(t, r)
	got := byMerchant(rep.Findings)
	want := map[string]Action{"m-hot redis_high": ActionRepaired, "m-hot orphan_pending": ActionRepaired, "m-gap missing_key": ActionRepaired}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %v\nwant %v", sortedKeys(got), sortedKeys(want))
	}
	var sum int64
	var carried string
	for s, tag := range shard.Tags("m-hot", 4) {
		q, err := quota.Parse(e.quota(tag))
		if err != nil || !q.Exists {
			t.Fatalf("shard %s: %+v %v", tag, q, err)
		}
		sum += q.Remain
		for _, p := range q.Pending {
			if p.EventID == "evt-orphan" {
				t.Error("the orphaned deduction was kept")
			}
			if p.EventID == "evt-young" && s == shard.Of("evt-young", 4) {
				carried = tag
			}
		}
	}
	if sum != 64 || carried == "" {
		t.Fatalf("m-hot shards sum to %d (want 64), young deduction in its shard: %q", sum, carried)
	}
	var gap int64
	for _, tag := range shard.Tags("m-gap", 2) {
		q, _ := quota.Parse(e.quota(tag))
		gap += q.Remain
	}
	if gap != 50 {
		t.Fatalf("m-gap hydrated to %d, want 50", gap)
	}
	if again := mustRun(t, r); len(again.Findings) != 0 || again.Status != StatusClean {
		t.Fatalf("second run: %+v", again)
	}
}

// A shard whose hash cannot be parsed makes its merchant malformed, whatever
// the shard count: reported, never repaired, its key named. Only a shard that
// is truly missing is a routine hydration (TestShardedMerchants).
func TestMalformedShardIsReported(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.merchant("m-one", 50, 0)
	e.merchant("m-two", 75, 0)
	e.merchant("m-pend", 30, 0)
	e.exec("INSERT INTO merchant_shards (merchant_id, shards) VALUES ('m-two', 2), ('m-pend', 3)")
	e.setRaw("m-one", "remain", "fifty", "ver", "1")
	e.setQuota("m-two#0", 25, 1)
	e.setRaw("m-two#1", "remain", "fifty", "ver", "1")
	e.setQuota("m-pend#0", 10, 1)
	e.setQuota("m-pend#1", 10, 1, "evt-ok", 5, now)
	e.setRaw("m-pend#2", "remain", "5", "ver", "1", "p:evt-bad", "5")
	before := e.dumpRedis()

	r, _ := e.reconciler(Config{})
	rep := mustRun(t, r)
	want := map[string]Action{"m-one malformed": ActionReported, "m-two malformed": ActionReported, "m-pend malformed": ActionReported}
	if got := byMerchant(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %v\nwant %v", sortedKeys(got), sortedKeys(want))
	}
	if rep.Repaired != 0 || rep.Hydrated != 0 || rep.Status != StatusDrift {
		t.Fatalf("report %+v", rep)
	}
	bad := map[string]string{"m-one": "m-one", "m-two": "m-two#1", "m-pend": "m-pend#2"}
	for _, f := range e.auditFindings(rep.RunID) {
		if key := e.redis.Keys.Quota(bad[f.MerchantID]); !strings.Contains(f.Detail, key) {
			t.Errorf("%s %s: detail %q does not name %s", f.MerchantID, f.Kind, f.Detail, key)
		}
	}
	if !reflect.DeepEqual(e.dumpRedis(), before) {
		t.Fatal("a malformed merchant's shards were rewritten")
	}
}

// A reshard between reading a merchant's layout and taking its locks leaves
// the run holding the locks of shards the merchant no longer has: it must
// neither judge nor rewrite them. The merchant is checked again under its new
// layout (a busy retry) and found clean; no key of the old layout comes back.
func TestReshardBeforeLocking(t *testing.T) {
	e := newEnv(t)
	e.merchant("m-grow", 80, 0)
	e.merchant("m-shrink", 60, 0)
	e.exec("INSERT INTO merchant_shards (merchant_id, shards) VALUES ('m-shrink', 2)")
	e.setQuota("m-grow", 80, 1)
	e.setQuota("m-shrink#0", 30, 1)
	e.setQuota("m-shrink#1", 30, 1)
	d := e.deductor(deduct.Options{Shards: shard.NewCache(shard.NewStore(e.my.SQL), 0, nil)})
	to := map[string]int{"m-grow": 4, "m-shrink": 1}

	r, _ := e.reconciler(Config{})
	r.beforeLock = func(m string) {
		if n, ok := to[m]; ok {
			delete(to, m) // once: the retry sees the new layout
			if _, err := d.Reshard(e.ctx, m, n); err != nil {
				t.Error(err)
			}
		}
	}
	rep := mustRun(t, r)
	if len(rep.Findings) != 0 || rep.Repaired != 0 || rep.Hydrated != 0 || rep.Busy != 0 || rep.Checked != 2 {
		t.Fatalf("findings %v, report %+v", byMerchant(rep.Findings), rep)
	}
	for _, tag := range []string{"m-grow", "m-shrink#0", "m-shrink#1"} {
		if h := e.quota(tag); len(h) != 0 {
			t.Errorf("%s of the old layout is back: %v", tag, h)
		}
	}
}
