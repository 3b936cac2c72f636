package deduct

import (
	"context"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/quota"
)

func TestGrantAndShow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	out, err := e.d.Grant(ctx, "m-new", 10, "g1")
	if err != nil || out != Applied {
		t.Fatalf("Grant = %v, %v", out, err)
	}
	v, err := e.d.Show(ctx, "m-new")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Known || v.Cached || v.Credited != 10 || v.Expected != 10 {
		t.Errorf("after a grant: %+v", v)
	}

	e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-new", 4)})
	if out, err := e.d.Grant(ctx, "m-new", 10, "g1"); err != nil || out != Duplicate {
		t.Errorf("repeated grant = %v, %v; want duplicate", out, err)
	}
	if _, err := e.d.Grant(ctx, "m-new", 11, "g1"); failure.ClassOf(err) != failure.ClassConflict {
		t.Errorf("grant id reused with another amount = %v, want a permanent conflict", err)
	}
	if _, err := e.d.Grant(ctx, "m-new", 1, "e1"); failure.ClassOf(err) != failure.ClassConflict {
		t.Errorf("grant id equal to a payment's event id = %v, want a permanent conflict", err)
	}
	if _, err := e.d.Grant(ctx, "m-{new}", 1, "g9"); failure.ClassOf(err) != failure.ClassInvalid {
		t.Errorf("grant to a malformed merchant id = %v, want invalid", err)
	}

	// The cached hash is dropped by a grant, and the next deduction sees it.
	e.apply(e.d, []event.PaymentSucceeded{pay("e2", "m-new", 1)})
	if _, err := e.d.Grant(ctx, "m-new", 5, "g2"); err != nil {
		t.Fatal(err)
	}
	if remain, _ := e.quota("m-new"); remain != -1 {
		t.Errorf("hash still cached after a grant (remain %d)", remain)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e3", "m-new", 10)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 0 {
		t.Errorf("deduction of the whole new balance = %+v", res[0])
	}

	// Show with an in-flight (orphan) pending deduction and a confirmed one.
	key := e.redis.Keys.Quota("m-new")
	if err := e.redis.Client.HSet(ctx, key, quota.FieldRemain, 0,
		quota.PendingField("orphan"), quota.FormatPending(3, time.Now().Add(-time.Minute)),
		quota.PendingField("e3"), quota.FormatPending(10, time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	v, err = e.d.Show(ctx, "m-new")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Cached || v.Credited != 15 || v.Debited != 15 || len(v.Pending) != 2 {
		t.Fatalf("view = %+v", v)
	}
	if p := v.Pending[0]; p.EventID != "e3" || !p.InLedger || p.Amount != 10 {
		t.Errorf("confirmed-but-pending entry = %+v", p)
	}
	if p := v.Pending[1]; p.EventID != "orphan" || p.InLedger || p.Amount != 3 || p.Age < 59*time.Second {
		t.Errorf("orphan entry = %+v", p)
	}
	if v.Expected != -3 || v.Drift != 3 {
		t.Errorf("expected %d drift %d, want -3 and 3", v.Expected, v.Drift)
	}

	v, err = e.d.Show(ctx, "nobody")
	if err != nil || v.Known || v.Cached {
		t.Errorf("unknown merchant view = %+v, %v", v, err)
	}
}

// TestGrantBatch grants several merchants in one call, with a repeat, a
// conflicting reuse and an invalid grant: each gets its own outcome, and every
// credited merchant's cached hash is dropped, so its next deduction sees the grant.
func TestGrantBatch(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 5)
	e.grant("m-b", 5)
	e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e2", "m-b", 1)}) // both cached
	res, err := e.d.GrantBatch(context.Background(), []event.GrantCommand{
		{GrantID: "g1", MerchantID: "m-a", Amount: 10, Source: "plans"},
		{GrantID: "g2", MerchantID: "m-b", Amount: 20, Source: "plans"},
		{GrantID: "g1", MerchantID: "m-a", Amount: 10, Source: "plans"},
		{GrantID: "g1", MerchantID: "m-a", Amount: 11, Source: "plans"},
		{GrantID: "g{3}", MerchantID: "m-a", Amount: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		out   Outcome
		class string
		bal   int64
	}{{Applied, "", 14}, {Applied, "", 24}, {Duplicate, "", 14}, {Conflict, failure.ClassConflict, 0}, {Invalid, failure.ClassInvalid, 0}}
	for i, w := range want {
		if r := res[i]; r.Outcome != w.out || failure.ClassOf(r.Err) != w.class || r.BalanceAfter != w.bal {
			t.Errorf("grant %d = %+v, want %s (%q) balance %d", i, r, w.out, w.class, w.bal)
		}
	}
	for m, remain := range map[string]int64{"m-a": 14, "m-b": 24} {
		if cached, _ := e.quota(m); cached != -1 {
			t.Errorf("%s still cached after a grant (remain %d)", m, cached)
		}
		if r := e.apply(e.d, []event.PaymentSucceeded{pay("all-"+m, m, remain)}); r[0].Outcome != Applied || r[0].BalanceAfter != 0 {
			t.Errorf("%s: deduction of the whole new balance = %+v", m, r[0])
		}
	}
}
