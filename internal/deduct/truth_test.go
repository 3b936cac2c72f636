package deduct

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

// Issue: a cache that lies low must never become a business result. Each test
// here failed before MySQL decided every rejection and before an event that
// ended without a debit gave its Redis deduction back.

// TestRedisUnderReportingIsCaught: remain set to 0 by hand while MySQL holds
// quota. The payment is applied, never recorded as insufficient.
func TestRedisUnderReportingIsCaught(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 1)}) // 9 in both stores
	if err := e.redis.Client.HSet(context.Background(), e.redis.Keys.Quota("m-a"), quota.FieldRemain, 0).Err(); err != nil {
		t.Fatal(err)
	}
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 3), pay("e2", "m-a", 7), pay("e3", "m-a", 6)})
	if got := outcomes(res); !slices.Equal(got, []Outcome{Applied, Insufficient, Applied}) {
		t.Fatalf("outcomes = %v, want [applied insufficient applied] (MySQL had 9)", got)
	}
	if res[1].BalanceAfter != 6 {
		t.Errorf("the rejection's balance = %d, want 6 (MySQL's, after e1)", res[1].BalanceAfter)
	}
	if n := counterValue(t, e.d.metrics.staleRehydrations.WithLabelValues("under")); n < 1 {
		t.Errorf("under-reporting rehydrations = %v, want >= 1", n)
	}
	// The redelivery is a duplicate of the debit, not of a rejection.
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m-a", 3)}); res[0].Outcome != Duplicate || res[0].BalanceAfter != 6 {
		t.Errorf("redelivery = %+v, want a duplicate with balance 6", res[0])
	}
	e.checkConsistent()
}

// TestRejectionWaitsForMySQL: quota granted in MySQL while the cache still
// says empty (a grant whose cache drop was lost). Redis rejects; MySQL, in the
// rejection's own transaction, covers it: applied.
func TestRejectionWaitsForMySQL(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 2)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 2)}) // 0 in both stores
	h := &hookLedger{beforeCommit: func(ctx context.Context, _ []ledger.Row) error {
		_, err := e.store.Grant(ctx, []ledger.Credit{{ID: "late-grant", MerchantID: "m-a", Amount: 50}})
		return err
	}}
	d := e.hookedDeductor(h)
	res := e.apply(d, []event.PaymentSucceeded{pay("e1", "m-a", 5)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 45 {
		t.Fatalf("result = %+v, want applied with balance 45", res[0])
	}
	e.checkConsistent()
}

// TestUnknownMerchantWaitsForMySQL: the merchant gets its balance row between
// the cache's "unknown" and the commit: not recorded as unknown.
func TestUnknownMerchantWaitsForMySQL(t *testing.T) {
	e := newEnv(t)
	h := &hookLedger{beforeCommit: func(ctx context.Context, _ []ledger.Row) error {
		_, err := e.store.Grant(ctx, []ledger.Credit{{ID: "first-grant", MerchantID: "m-new", Amount: 10}})
		return err
	}}
	d := e.hookedDeductor(h)
	res := e.apply(d, []event.PaymentSucceeded{pay("e1", "m-new", 4)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 6 {
		t.Fatalf("result = %+v, want applied with balance 6", res[0])
	}
	e.checkConsistent()
}

// TestConflictGivesItsDeductionBack: one event_id for two merchants, handled
// by two holders at once (different locks). Both deduct in Redis; m-a's copy
// commits first; m-b's insert hits the unique key and its redo calls it a
// conflict. m-b's cache must not keep the deduction.
func TestConflictGivesItsDeductionBack(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("wa", "m-a", 1), pay("wb", "m-b", 1)}) // 9 and 9, warm
	other := e.newDeductor()
	h := &hookLedger{beforeCommit: func(ctx context.Context, _ []ledger.Row) error {
		// The other worker, holding m-a's lock, records the same event_id first.
		_, err := other.Apply(ctx, []event.PaymentSucceeded{pay("x", "m-a", 3)})
		return err
	}}
	d := e.hookedDeductor(h)
	res := e.apply(d, []event.PaymentSucceeded{pay("x", "m-b", 3), pay("b2", "m-b", 2)})
	if got := outcomes(res); !slices.Equal(got, []Outcome{Conflict, Applied}) {
		t.Fatalf("outcomes = %v, want [conflict applied]", got)
	}
	if n := counterValue(t, d.metrics.staleRehydrations.WithLabelValues("unmatched")); n != 1 {
		t.Errorf("unmatched rehydrations = %v, want 1", n)
	}
	e.checkRedisEqualsMySQL("m-a", "m-b")
	e.checkConsistent()
}

// TestConflictAfterCrashGivesItsDeductionBack: m-b's holder deducts and dies
// before its commit; m-a's copy of the event_id wins; m-b's redelivery is a
// conflict, and m-b's cache loses the dead holder's deduction.
func TestConflictAfterCrashGivesItsDeductionBack(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("wa", "m-a", 1), pay("wb", "m-b", 1)})
	dying := e.newDeductor()
	dying.afterStep = func(s string) error {
		if s == stepDeducted {
			return errKilled
		}
		return nil
	}
	if _, err := dying.Apply(context.Background(), []event.PaymentSucceeded{pay("x", "m-b", 3)}); !errors.Is(err, errKilled) {
		t.Fatalf("Apply = %v, want the kill", err)
	}
	if err := e.redis.Client.Del(context.Background(), e.redis.Keys.Lock("m-b")).Err(); err != nil { // its TTL ran out
		t.Fatal(err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("x", "m-a", 3)})
	res := e.apply(e.newDeductor(), []event.PaymentSucceeded{pay("x", "m-b", 3)})
	if res[0].Outcome != Conflict {
		t.Fatalf("redelivery = %+v, want a conflict", res[0])
	}
	e.checkRedisEqualsMySQL("m-a", "m-b")
	e.checkConsistent()
}

// TestDuplicateOfRejectionGivesDeductionBack: holder A recorded the event as
// rejected (MySQL had nothing) after holder B had found it unrecorded; then
// quota was granted and B deducted it in Redis. B's insert hits A's row, and
// its redo finds a "duplicate" of a rejection: B's deduction must go back.
func TestDuplicateOfRejectionGivesDeductionBack(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 1)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 1)}) // 0 in both stores
	h := &hookLedger{afterExisting: func(ctx context.Context) {
		// A, which lost its lock to B a moment ago, commits its rejection.
		if err := e.store.Commit(ctx, []ledger.Row{rejectedRow(pay("x", "m-a", 5), ledger.ReasonInsufficient)}); err != nil {
			t.Errorf("A's rejection: %v", err)
		}
		// Quota lands, and B's cache shows it (a grant's drop, then hydration).
		if _, err := e.store.Grant(ctx, []ledger.Credit{{ID: "late-grant", MerchantID: "m-a", Amount: 10}}); err != nil {
			t.Error(err)
		}
		if err := e.redis.Client.HSet(ctx, e.redis.Keys.Quota("m-a"), quota.FieldRemain, 10).Err(); err != nil {
			t.Error(err)
		}
	}}
	res := e.apply(e.hookedDeductor(h), []event.PaymentSucceeded{pay("x", "m-a", 5)})
	if res[0].Outcome != Duplicate {
		t.Fatalf("result = %+v, want a duplicate of the rejection", res[0])
	}
	e.checkRedisEqualsMySQL("m-a")
	e.checkConsistent()
}

// TestDuplicateAfterOwnDeductionGivesItBack: we find an event unrecorded and
// deduct it, but another holder (ours had lapsed) recorded and confirmed it
// meanwhile. Our insert hits its row; our extra deduction must go back.
func TestDuplicateAfterOwnDeductionGivesItBack(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 1)}) // 9
	h := &hookLedger{afterExisting: func(ctx context.Context) {
		// The other holder's whole batch: deduct, commit, confirm (its lock
		// is the same key; the test's locker lets it in as ours had expired).
		l := e.locker.held("m-a")
		if err := e.redis.Client.Del(ctx, l.Key()).Err(); err != nil {
			t.Error(err)
		}
		if _, err := e.newDeductor().Apply(ctx, []event.PaymentSucceeded{pay("x", "m-a", 4)}); err != nil {
			t.Error(err)
		}
		if err := e.redis.Client.Set(ctx, l.Key(), l.Token(), 0).Err(); err != nil { // and we have it again
			t.Error(err)
		}
	}}
	res := e.apply(e.hookedDeductor(h), []event.PaymentSucceeded{pay("x", "m-a", 4)})
	if res[0].Outcome != Duplicate || res[0].BalanceAfter != 5 {
		t.Fatalf("result = %+v, want a duplicate with balance 5", res[0])
	}
	e.checkRedisEqualsMySQL("m-a")
	e.checkConsistent()
}

// checkRedisEqualsMySQL: each merchant's cache, once hydrated, is MySQL's
// balance, with no pending field. A deduction follows to prove it.
func (e *env) checkRedisEqualsMySQL(merchants ...string) {
	e.t.Helper()
	for _, m := range merchants {
		remain, pending := e.quota(m)
		avail := e.balance(m).Available()
		if len(pending) > 0 || (remain != -1 && remain != avail) {
			e.t.Errorf("merchant %s: Redis remain %d pending %v; MySQL %d", m, remain, pending, avail)
		}
	}
}
