package reconcile

import (
	"fmt"
	"github.com/quotaflow/billing/internal/ledger"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

func TestClassify(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	old := fmt.Sprint(now.Add(-10 * time.Minute).UnixMilli())
	young := fmt.Sprint(now.Add(-10 * time.Second).UnixMilli())
	pol := Config{Grace: 2 * time.Minute, RepairCeiling: 1000}
	type want struct {
		kinds   []Kind
		action  Action // of every finding; "" = waits for the plan
		plan    plan
		delta   []int64
		pending []int64
		detail  string // in every finding's detail, when set
	}
	cases := []struct {
		name string
		in   merchantInput
		pol  Config
		want want
	}{
		{"clean", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("70", "3")}, pol, want{}},
		{"young pending is in-flight work, not drift",
			merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("65", "4", "p:e1", "5:"+young)}, pol, want{}},
		{"redis high", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("80", "3")}, pol,
			want{kinds: []Kind{KindRedisHigh}, plan: plan{Kind: planRepair, ExpectVer: "3", Remain: 70}, delta: []int64{10}, pending: []int64{0}}},
		{"redis low with young pending kept", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("60", "3", "p:e1", "5:"+young)}, pol,
			want{kinds: []Kind{KindRedisLow}, plan: plan{Kind: planRepair, ExpectVer: "3", Remain: 65}, delta: []int64{-5}, pending: []int64{5}}},
		{"orphan is given back", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("65", "9", "p:e1", "5:"+old)}, pol,
			want{kinds: []Kind{KindOrphanPending}, plan: plan{Kind: planRepair, ExpectVer: "9", Remain: 70, Delete: []string{"p:e1"}},
				delta: []int64{-5}, pending: []int64{5}}},
		{"confirmed pending field is removed, remain kept",
			merchantInput{balance: balance{Credited: 100, Debited: 35}, Shards: h("65", "9", "p:e1", "5:"+young), Confirmed: map[string]bool{"e1": true}}, pol,
			want{kinds: []Kind{KindStalePending}, plan: plan{Kind: planRepair, ExpectVer: "9", Remain: 65, Delete: []string{"p:e1"}},
				delta: []int64{0}, pending: []int64{5}}},
		{"drift and orphan together", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("75", "2", "p:e1", "5:"+old, "p:e2", "7:"+young)}, pol,
			want{kinds: []Kind{KindRedisHigh, KindOrphanPending}, plan: plan{Kind: planRepair, ExpectVer: "2", Remain: 63, Delete: []string{"p:e1"}},
				delta: []int64{17, -5}, pending: []int64{12, 5}}},
		{"missing key is hydrated", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: shards(nil)}, pol,
			want{kinds: []Kind{KindMissingKey}, plan: plan{Kind: planHydrate, Remain: 70, Floor: "0"}, delta: []int64{0}, pending: []int64{0}}},
		{"missing key only reported without hydration", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: shards(nil)}, Config{Grace: time.Minute, SkipHydrate: true},
			want{kinds: []Kind{KindMissingKey}, action: ActionReported, delta: []int64{0}, pending: []int64{0}}},
		{"dry run", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("80", "3")}, Config{Grace: time.Minute, DryRun: true, SkipHydrate: true},
			want{kinds: []Kind{KindRedisHigh}, action: ActionDryRun, delta: []int64{10}, pending: []int64{0}}},
		{"over ceiling", merchantInput{balance: balance{Credited: 5000, Debited: 0}, Shards: h("0", "3")}, pol,
			want{kinds: []Kind{KindRedisLow}, action: ActionOverCeiling, delta: []int64{-5000}, pending: []int64{0}}},
		{"held by a critical ledger finding", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: h("80", "3"), Held: true}, pol,
			want{kinds: []Kind{KindRedisHigh}, action: ActionReported, delta: []int64{10}, pending: []int64{0}}},
		{"negative balance is reported and holds the repair", merchantInput{balance: balance{Credited: 10, Debited: 20}, Shards: h("5", "3")}, pol,
			want{kinds: []Kind{KindNegativeBalance, KindRedisHigh}, action: ActionReported, delta: []int64{-10, 15}, pending: []int64{0, 0}}},
		{"negative balance already reported by the ledger audit", merchantInput{balance: balance{Credited: 10, Debited: 20}, Shards: h("5", "3"), Held: true}, pol,
			want{kinds: []Kind{KindRedisHigh}, action: ActionReported, delta: []int64{15}, pending: []int64{0}}},
		{"negative within the floor is no finding", merchantInput{balance: balance{Credited: 10, Debited: 20, Policy: ledger.Policy{Kind: ledger.PolicyFloor, Floor: 10}}, Shards: h("-10", "3")}, pol, want{}},
		{"below the floor is reported and holds the repair", merchantInput{balance: balance{Credited: 10, Debited: 21, Policy: ledger.Policy{Kind: ledger.PolicyFloor, Floor: 10}}, Shards: h("-10", "3")}, pol,
			want{kinds: []Kind{KindNegativeBalance, KindRedisHigh}, action: ActionReported, delta: []int64{-11, 1}, pending: []int64{0, 0}}},
		{"overage: any negative balance is no finding", merchantInput{balance: balance{Credited: 10, Debited: 900, Policy: ledger.Policy{Kind: ledger.PolicyOverage}}, Shards: h("-890", "3")}, pol, want{}},
		{"malformed remain", merchantInput{balance: balance{Credited: 10}, Shards: h("ten", "3")}, pol,
			want{kinds: []Kind{KindMalformed}, action: ActionReported, delta: []int64{0}, pending: []int64{0}, detail: "quota:{m-1}: "}},
		{"malformed pending", merchantInput{balance: balance{Credited: 10}, Shards: h("10", "3", "p:e1", "5")}, pol,
			want{kinds: []Kind{KindMalformed}, action: ActionReported, delta: []int64{0}, pending: []int64{0}, detail: "quota:{m-1}: "}},
		{"shards are summed with their pending", merchantInput{balance: balance{Credited: 100, Debited: 30},
			Shards: shards(hash("40", "3"), hash("25", "7", "p:e1", "5:"+young))}, pol, want{}},
		{"sharded drift is repaired", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: shards(hash("40", "3"), hash("40", "7"))}, pol,
			want{kinds: []Kind{KindRedisHigh}, plan: plan{Kind: planRepair, Remain: 70}, delta: []int64{10}, pending: []int64{0}}},
		{"a missing shard is hydrated", merchantInput{balance: balance{Credited: 100, Debited: 30}, Shards: shards(hash("35", "3"), nil)}, pol,
			want{kinds: []Kind{KindMissingKey}, plan: plan{Kind: planHydrate, Remain: 70, Floor: "0"}, delta: []int64{0}, pending: []int64{0}}},
		{"malformed remain on a shard", merchantInput{balance: balance{Credited: 100}, Shards: shards(hash("50", "3"), hash("fifty", "3"))}, pol,
			want{kinds: []Kind{KindMalformed}, action: ActionReported, delta: []int64{0}, pending: []int64{0}, detail: "quota:{m-1#1}: "}},
		{"malformed pending on a shard", merchantInput{balance: balance{Credited: 100}, Shards: shards(hash("50", "3"), hash("25", "3"), hash("25", "3", "p:e1", "5"))}, pol,
			want{kinds: []Kind{KindMalformed}, action: ActionReported, delta: []int64{0}, pending: []int64{0}, detail: "quota:{m-1#2}: "}},
		{"malformed beside a missing shard is malformed", merchantInput{balance: balance{Credited: 100}, Shards: shards(nil, hash("x", "3"))}, pol,
			want{kinds: []Kind{KindMalformed}, action: ActionReported, delta: []int64{0}, pending: []int64{0}, detail: "quota:{m-1#1}: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.ID = "m-1"
			v := classify(c.in, now, c.pol)
			var kinds []Kind
			var delta, pending []int64
			for _, f := range v.Findings {
				kinds = append(kinds, f.Kind)
				delta = append(delta, f.Delta)
				pending = append(pending, f.Pending)
				if f.Action != c.want.action {
					t.Errorf("%s action = %q, want %q", f.Kind, f.Action, c.want.action)
				}
				if !strings.Contains(f.Detail, c.want.detail) {
					t.Errorf("%s detail = %q, want it to contain %q", f.Kind, f.Detail, c.want.detail)
				}
				if f.MerchantID != "m-1" {
					t.Errorf("merchant = %q", f.MerchantID)
				}
				if f.RedisValue != nil && f.Delta != *f.RedisValue-f.Expected && !f.Kind.critical() {
					t.Errorf("%s: delta %d != redis %d - expected %d", f.Kind, f.Delta, *f.RedisValue, f.Expected)
				}
			}
			if !reflect.DeepEqual(kinds, c.want.kinds) || !reflect.DeepEqual(delta, c.want.delta) || !reflect.DeepEqual(pending, c.want.pending) {
				t.Errorf("kinds %v delta %v pending %v; want %v %v %v", kinds, delta, pending, c.want.kinds, c.want.delta, c.want.pending)
			}
			if !reflect.DeepEqual(v.Plan, c.want.plan) {
				t.Errorf("plan = %+v, want %+v", v.Plan, c.want.plan)
			}
		})
	}
}

// hash builds an HGETALL result: remain, ver, then field/value pairs.
func hash(remain, ver string, kv ...string) map[string]string {
	m := map[string]string{"remain": remain, "ver": ver}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// h is the quota of an unsharded merchant m-1 holding hash(remain, ver, kv...).
func h(remain, ver string, kv ...string) []shardHash {
	return shards(hash(remain, ver, kv...))
}

// shards is m-1's quota over len(hs) shards, keyed as the keyspace would
// without a prefix; a nil hash is a missing shard.
func shards(hs ...map[string]string) []shardHash {
	out := make([]shardHash, len(hs))
	for s, hh := range hs {
		out[s] = shardHash{Key: "quota:{" + shard.Tag("m-1", s, len(hs)) + "}", Hash: hh}
	}
	return out
}

func TestResolveFillsOnlyWaitingFindings(t *testing.T) {
	v := verdict{Findings: []Finding{{Kind: KindRedisHigh}, {Kind: KindNegativeBalance, Action: ActionReported}}}
	v.resolve(ActionRepaired)
	if v.Findings[0].Action != ActionRepaired || v.Findings[1].Action != ActionReported {
		t.Fatalf("actions = %q, %q", v.Findings[0].Action, v.Findings[1].Action)
	}
}

func TestDescribeFitsTheAuditColumn(t *testing.T) {
	now := time.Now()
	var entries []quota.Pending
	for i := range 100 {
		entries = append(entries, quota.Pending{EventID: fmt.Sprintf("evt-%040d", i), Amount: 5, At: now.Add(-time.Hour)})
	}
	d := describe(entries, now)
	if len(d) > maxDetail || !strings.Contains(d, "more)") || !strings.HasPrefix(d, "100 entries:") {
		t.Fatalf("describe = %d bytes: %q", len(d), d)
	}
}

func TestBaseOf(t *testing.T) {
	cp := checkpoint{LastSeq: 100, Credited: 9, Debited: 4}
	for _, c := range []struct {
		name   string
		stored checkpoint
		seq    int64 // the balance row's
		full   bool
		base   checkpoint
		stale  bool
	}{
		{"behind the balance row: built on", cp, 200, false, cp, false},
		{"at the balance row: built on", cp, 100, false, cp, false},
		{"beyond the balance row: stale, recounted", cp, 99, false, checkpoint{}, true},
		{"none stored", checkpoint{}, 200, false, checkpoint{}, false},
		{"full: ignored", cp, 200, true, checkpoint{}, false},
		{"full and beyond: ignored (full overwrites anyway)", cp, 99, true, checkpoint{}, false},
	} {
		base, stale := baseOf(c.stored, c.seq, c.full)
		if base != c.base || stale != c.stale {
			t.Errorf("%s: base %+v stale %v", c.name, base, stale)
		}
	}
}

func TestAuditLedger(t *testing.T) {
	ok := ledgerView{Balance: balance{Credited: 100, Debited: 30}, Base: checkpoint{LastSeq: 9, Credited: 60, Debited: 20}, Credit: 40, Debit: 10}
	if f := auditLedger("m", ok); len(f) != 0 {
		t.Fatalf("consistent view: %+v", f)
	}
	bad := ok
	bad.Debit += 4
	f := auditLedger("m", bad)
	if len(f) != 1 || f[0].Kind != KindLedgerMismatch || f[0].Expected != 34 || f[0].Delta != -4 || f[0].Action != ActionReported {
		t.Fatalf("debit mismatch: %+v", f)
	}
	neg := ledgerView{Balance: balance{Credited: 10, Debited: 20}, Credit: 10, Debit: 20}
	if f := auditLedger("m", neg); len(f) != 1 || f[0].Kind != KindNegativeBalance || f[0].Delta != -10 {
		t.Fatalf("negative: %+v", f)
	}
}

func TestAuditGrants(t *testing.T) {
	view := func(credited, debited, left, grants int64) ledgerView {
		return ledgerView{Balance: balance{Credited: credited, Debited: debited}, Credit: credited, Debit: debited,
			GrantsLeft: left, Grants: grants}
	}
	floor := func(v ledgerView) ledgerView {
		v.Balance.Policy = ledger.Policy{Kind: ledger.PolicyFloor, Floor: 50}
		return v
	}
	for _, c := range []struct {
		name  string
		v     ledgerView
		delta int64 // 0: no finding
	}{
		{"grants equal the balance", view(100, 30, 70, 2), 0},
		{"a balance row without grants (adopted on its next debit)", view(100, 30, 0, 0), 0},
		{"grants short of the balance", view(100, 30, 60, 2), -10},
		{"grants beyond the balance", view(100, 30, 75, 1), 5},
		{"a debt: no grant has a remainder", floor(view(100, 120, 0, 1)), 0},
		{"a debt with a grant remainder", floor(view(100, 120, 5, 1)), 5},
	} {
		f := auditLedger("m", c.v)
		switch {
		case c.delta == 0 && len(f) != 0:
			t.Errorf("%s: %+v", c.name, f)
		case c.delta != 0 && (len(f) != 1 || f[0].Kind != KindGrantsMismatch || f[0].Delta != c.delta || !f[0].Kind.critical()):
			t.Errorf("%s: %+v, want a grants_mismatch of %d", c.name, f, c.delta)
		}
	}
}

func TestLedgerViewNext(t *testing.T) {
	v := ledgerView{Base: checkpoint{LastSeq: 9, Credited: 60, Debited: 20}, Credit: 30, Debit: 5, MaxSeq: 15}
	cp, ok := v.next(false)
	if !ok || cp != (checkpoint{LastSeq: 15, Credited: 90, Debited: 25}) {
		t.Fatalf("next = %+v %v", cp, ok)
	}
	v = ledgerView{Base: checkpoint{LastSeq: 9, Credited: 60}}
	if _, ok := v.next(false); ok {
		t.Fatal("no new row: no checkpoint to write")
	}
	if cp, ok := v.next(true); !ok || cp != (checkpoint{LastSeq: 9, Credited: 60}) {
		t.Fatalf("full: %+v %v", cp, ok)
	}
	// A stale checkpoint is overwritten even when no row is new.
	v = ledgerView{Stale: true}
	if cp, ok := v.next(false); !ok || cp != (checkpoint{}) {
		t.Fatalf("stale: %+v %v", cp, ok)
	}
}
