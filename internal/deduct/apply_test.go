package deduct

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/quota"
)

func TestApplyOutcomes(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 20)
	e.grant("m-b", 3)
	e.apply(e.d, []event.PaymentSucceeded{pay("old-1", "m-a", 2), pay("old-2", "m-a", 1)})

	batch := []event.PaymentSucceeded{
		pay("e1", "m-a", 4),    // 0 applied, 17 -> 13
		pay("e2", "m-b", 5),    // 1 insufficient (3)
		pay("e3", "m-x", 1),    // 2 unknown merchant
		pay("old-1", "m-a", 2), // 3 duplicate of a ledger row
		pay("old-2", "m-a", 9), // 4 conflict with a ledger row
		pay("e1", "m-a", 4),    // 5 duplicate within the batch
		pay("e2", "m-a", 5),    // 6 conflict within the batch
		pay("e4", "m-a", 4),    // 7 applied, 13 -> 9
		pay("e5", "m-a", 10),   // 8 insufficient (9)
		pay("e6", "m-{x}", 1),  // 9 invalid: braces would break the hash tag
		pay("e7", "m-b", 3),    // 10 applied, 3 -> 0
		pay("e8", "m-b", 1),    // 11 insufficient (0)
	}
	res := e.apply(e.d, batch)
	want := []struct {
		outcome Outcome
		after   int64
		class   string
	}{
		{Applied, 13, ""}, {Insufficient, 3, ""}, {UnknownMerchant, 0, ""}, {Duplicate, 18, ""},
		{Conflict, 0, failure.ClassConflict}, {Duplicate, 13, ""}, {Conflict, 0, failure.ClassConflict},
		{Applied, 9, ""}, {Insufficient, 9, ""}, {Invalid, 0, failure.ClassInvalid}, {Applied, 0, ""}, {Insufficient, 0, ""},
	}
	for i, w := range want {
		r := res[i]
		if r.Outcome != w.outcome || r.BalanceAfter != w.after || failure.ClassOf(r.Err) != w.class || (w.class != "") != failure.IsPermanent(r.Err) {
			t.Errorf("event %d (%s): got %s after=%d err=%v; want %s after=%d class %q",
				i, batch[i].EventID, r.Outcome, r.BalanceAfter, r.Err, w.outcome, w.after, w.class)
		}
	}
	if remain, _ := e.quota("m-x"); remain != -1 {
		t.Errorf("an unknown merchant got a quota hash (remain %d)", remain)
	}
	if remain, _ := e.quota("m-a"); remain != 9 {
		t.Errorf("m-a remain = %d, want 9", remain)
	}
	existing, err := e.store.ExistingEvents(context.Background(), []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"})
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 7 {
		t.Errorf("ledger rows for the batch: %d (want 7: every event but the invalid one)", len(existing))
	}
	if r := existing["e3"]; r.Kind != "rejected" || r.BalanceAfter != nil {
		t.Errorf("unknown merchant's row: %s, balance_after %v; want rejected with none", r.Kind, r.BalanceAfter)
	}
	e.checkConsistent()
}

// A redelivered original that arrives in one batch after a conflicting copy
// of itself (reordered delivery) is a duplicate of its ledger row: only the
// copy is a conflict. Found by the fault suite (internal/faults).
func TestApplyConflictingCopyBeforeRedeliveredOriginal(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 20)
	e.apply(e.d, []event.PaymentSucceeded{pay("old-1", "m-a", 2)})
	before := e.snapshot("m-a")
	res := e.apply(e.d, []event.PaymentSucceeded{
		pay("old-1", "m-a", 3), // 0 conflicting copy, first in the batch
		pay("old-1", "m-a", 2), // 1 the original again: a duplicate of its row
		pay("new-1", "m-a", 4), // 2 applied, 18 -> 14
		pay("new-1", "m-a", 5), // 3 conflicts with the row 2 just wrote
	})
	if res[0].Outcome != Conflict || failure.ClassOf(res[0].Err) != failure.ClassConflict {
		t.Errorf("conflicting copy = %+v, want a conflict", res[0])
	}
	if res[1].Outcome != Duplicate || res[1].Err != nil || res[1].BalanceAfter != 18 {
		t.Errorf("redelivered original = %+v, want a duplicate with 18 after", res[1])
	}
	if res[2].Outcome != Applied || res[2].BalanceAfter != 14 {
		t.Errorf("new event = %+v, want applied with 14 after", res[2])
	}
	if res[3].Outcome != Conflict || failure.ClassOf(res[3].Err) != failure.ClassConflict {
		t.Errorf("rival of a new event = %+v, want a conflict", res[3])
	}
	if after := e.snapshot("m-a"); fmt.Sprint(after) == fmt.Sprint(before) {
		t.Errorf("the batch moved nothing")
	}
	e.checkConsistent()
}

func TestApplyAgainIsADuplicate(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 10)
	batch := []event.PaymentSucceeded{pay("e1", "m-a", 4), pay("e2", "m-b", 3), pay("e3", "m-a", 7), pay("e4", "m-zz", 1)}
	first := e.apply(e.d, batch)
	before := e.snapshot("m-a", "m-b", "m-zz")
	second := e.apply(e.newDeductor(), batch)
	for i := range batch {
		if second[i].Outcome != Duplicate || second[i].BalanceAfter != first[i].BalanceAfter {
			t.Errorf("event %d again: %+v, want a duplicate with balance %d", i, second[i], first[i].BalanceAfter)
		}
	}
	if after := e.snapshot("m-a", "m-b", "m-zz"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("state changed on redelivery:\n%v\n%v", before, after)
	}
	e.checkConsistent()
}

func TestMissingQuotaIsHydratedNeverZero(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 5) // a grant drops the hash: it is missing now
	if remain, _ := e.quota("m-a"); remain != -1 {
		t.Fatalf("hash present after a grant (remain %d)", remain)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 2)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 3 {
		t.Fatalf("first deduction on a missing hash = %+v, want applied with 3 left", res[0])
	}
	if remain, _ := e.quota("m-a"); remain != 3 {
		t.Errorf("remain = %d, want 3", remain)
	}
	if n := counterValue(t, e.d.metrics.hydrations); n != 1 {
		t.Errorf("hydrations = %v, want 1", n)
	}

	// A hash without remain but with leftover p: fields is missing too, and
	// the leftovers must not be reused: MySQL does not count them.
	key := e.redis.Keys.Quota("m-a")
	ctx := context.Background()
	if err := e.redis.Client.HDel(ctx, key, quota.FieldRemain).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.HSet(ctx, key, quota.PendingField("e2"), quota.FormatPending(2, time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	res = e.apply(e.d, []event.PaymentSucceeded{pay("e2", "m-a", 2)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 1 {
		t.Fatalf("deduction = %+v, want applied with 1 left", res[0])
	}
	if remain, _ := e.quota("m-a"); remain != 1 {
		t.Errorf("remain = %d, want 1 (the stale p: must not count as deducted)", remain)
	}
	e.checkConsistent()
}

func TestPendingDeductionIsReused(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("e0", "m-a", 1)})
	// As if a worker deducted e1 (3) and died before MySQL: remain 9 - 3.
	ctx := context.Background()
	key := e.redis.Keys.Quota("m-a")
	if err := e.redis.Client.HSet(ctx, key, quota.FieldRemain, 6, quota.PendingField("e1"), quota.FormatPending(3, time.Now()),
		quota.PendingField("e2"), quota.FormatPending(5, time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 3), pay("e2", "m-a", 4)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 6 {
		t.Errorf("e1 = %+v, want applied with 6 left", res[0])
	}
	if res[1].Outcome != Conflict || failure.ClassOf(res[1].Err) != failure.ClassConflict {
		t.Errorf("e2 pending with another amount = %+v, want a conflict", res[1])
	}
	remain, pending := e.quota("m-a")
	if remain != 6 {
		t.Errorf("remain = %d, want 6: a pending deduction is reused, not repeated", remain)
	}
	if _, ok := pending["e1"]; ok {
		t.Error("p:e1 not confirmed")
	}
	if _, ok := pending["e2"]; !ok {
		t.Error("p:e2 of the conflicting event was removed")
	}
	if b := e.balance("m-a"); b.Debited != 4 {
		t.Errorf("debited = %d, want 4", b.Debited)
	}
}

func TestApplyEmptyAndAllScreened(t *testing.T) {
	e := newEnv(t)
	if res, err := e.d.Apply(context.Background(), nil); err != nil || len(res) != 0 {
		t.Fatalf("Apply(nil) = %v, %v", res, err)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("bad{", "m-a", 1), pay("e1", "m-a", 0)})
	if got := outcomes(res); !slices.Equal(got, []Outcome{Invalid, Invalid}) {
		t.Errorf("outcomes = %v", got)
	}
	if n, _ := e.redis.Client.Exists(context.Background(), e.redis.Keys.Lock("m-a")).Result(); n != 0 {
		t.Error("a lock was taken for a batch with nothing to apply")
	}
}
