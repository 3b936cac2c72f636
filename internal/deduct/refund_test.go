package deduct

import (
	"context"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
)

func refundCmd(id, payment, merchant string, amount int64) event.RefundCommand {
	return event.RefundCommand{RefundID: id, EventID: payment, MerchantID: merchant, Amount: amount,
		Reason: event.RefundReasonRefund, OccurredAt: time.Now().UTC()}
}

// A refund drops the merchant's cached hash, as a grant does, and so does
// its duplicate (it completes a refund interrupted before its drop); a
// refund waiting for its payment is dropped with the payment's batch.
func TestRefundDropsTheCacheAsAGrant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.grant("m", 100)
	e.apply(e.d, []event.PaymentSucceeded{pay("p1", "m", 10)})
	if r, err := e.d.Refund(ctx, refundCmd("r1", "p1", "m", 4)); err != nil || r.Outcome != Applied || r.Refunded != 4 {
		t.Fatalf("refund = %+v, %v", r, err)
	}
	if remain, _ := e.quota("m"); remain != -1 {
		t.Errorf("hash still cached after a refund (remain %d)", remain)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("p2", "m", 1)}) // hydrates: 100 - 10 + 4 - 1
	if remain, _ := e.quota("m"); remain != 93 {
		t.Errorf("remain %d after the refund and a payment, want 93", remain)
	}
	if r, err := e.d.Refund(ctx, refundCmd("r1", "p1", "m", 4)); err != nil || r.Outcome != Duplicate {
		t.Fatalf("refund again = %+v, %v", r, err)
	}
	if remain, _ := e.quota("m"); remain != -1 {
		t.Errorf("a duplicate refund left the hash cached (remain %d)", remain)
	}
	// Before its payment: it waits, then the payment's batch applies it and drops the hash.
	if r, err := e.d.Refund(ctx, refundCmd("r3", "p3", "m", 2)); err != nil || r.Outcome != Waiting {
		t.Fatalf("refund before its payment = %+v, %v", r, err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("p2b", "m", 1)}) // cached again: 92
	e.apply(e.d, []event.PaymentSucceeded{pay("p3", "m", 5)})
	if remain, _ := e.quota("m"); remain != -1 {
		t.Errorf("hash still cached after a payment its refund waited for (remain %d)", remain)
	}
	if b := e.balance("m"); b.Available() != 89 {
		t.Errorf("balance %d, want 89", b.Available())
	}
	if _, err := e.d.Refund(ctx, refundCmd("r4", "p1", "m", 7)); failure.ClassOf(err) != failure.ClassConflict {
		t.Errorf("refund beyond the debit = %v, want a permanent conflict", err)
	}
	if _, err := e.d.Refund(ctx, refundCmd("r{5}", "p1", "m", 1)); failure.ClassOf(err) != failure.ClassInvalid {
		t.Errorf("refund with a malformed id = %v, want invalid", err)
	}
	e.checkConsistent()
}
