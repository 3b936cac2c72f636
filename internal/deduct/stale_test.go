package deduct

import (
	"context"
	"slices"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/quota"
)

// TestRedisOverReportingIsCaught: Redis says far more than MySQL has (a
// failover lost writes). The guard refuses the overdraft, the hash is
// rehydrated, and the outcomes are exactly those of an honest Redis. Another
// merchant of the same batches is deducted once, not again on the redo.
func TestRedisOverReportingIsCaught(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 100)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 1)}) // m-a: 9 in both stores
	if err := e.redis.Client.HSet(context.Background(), e.redis.Keys.Quota("m-a"), quota.FieldRemain, 1_000_000).Err(); err != nil {
		t.Fatal(err)
	}

	batches := [][]event.PaymentSucceeded{
		{pay("a1", "m-a", 3), pay("b1", "m-b", 5), pay("a2", "m-a", 2)},                      // 5 <= 9: the guard passes
		{pay("a3", "m-a", 2), pay("a4", "m-a", 2), pay("b2", "m-b", 7), pay("a5", "m-a", 2)}, // 6 > 4: caught
		{pay("a6", "m-a", 1), pay("b3", "m-b", 1)},
	}
	// What an honest Redis decides, event by event.
	honest := map[string]int64{"m-a": 9, "m-b": 100}
	for _, batch := range batches {
		var want []Outcome
		for _, ev := range batch {
			if honest[ev.MerchantID] >= ev.Amount {
				honest[ev.MerchantID] -= ev.Amount
				want = append(want, Applied)
			} else {
				want = append(want, Insufficient)
			}
		}
		if got := outcomes(e.apply(e.d, batch)); !slices.Equal(got, want) {
			t.Errorf("batch %s...: outcomes %v, want %v", batch[0].EventID, got, want)
		}
	}
	if n := counterValue(t, e.d.metrics.staleRehydrations.WithLabelValues("over")); n < 1 {
		t.Errorf("stale rehydrations = %v, want >= 1", n)
	}
	if b := e.balance("m-a"); b.Available() != honest["m-a"] {
		t.Errorf("m-a MySQL balance %d, want %d", b.Available(), honest["m-a"])
	}
	if remain, _ := e.quota("m-b"); remain != honest["m-b"] {
		t.Errorf("m-b remain %d, want %d: deducted again on a redo", remain, honest["m-b"])
	}
	e.checkConsistent() // m-a's Redis is honest again
}

// TestStaleKeyOfUnknownMerchant: a hash for a merchant without a balance row
// (left over, or the row was never created) must not let a debit through.
func TestStaleKeyOfUnknownMerchant(t *testing.T) {
	e := newEnv(t)
	if err := e.redis.Client.HSet(context.Background(), e.redis.Keys.Quota("ghost"), quota.FieldRemain, 50, quota.FieldVer, 1).Err(); err != nil {
		t.Fatal(err)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("g1", "ghost", 5)})
	if res[0].Outcome != UnknownMerchant {
		t.Fatalf("outcome = %+v, want unknown_merchant", res[0])
	}
	if remain, _ := e.quota("ghost"); remain != -1 {
		t.Errorf("the ghost hash is still there (remain %d)", remain)
	}
}
