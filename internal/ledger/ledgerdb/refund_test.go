package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
)

func refundOf(id, event, merchant string, amount int64) ledger.Refund {
	return ledger.Refund{ID: id, EventID: event, MerchantID: merchant, Amount: amount, Reason: ledger.ReasonRefund,
		OccurredAt: time.Now().UTC()}
}

// refundOne records one refund: its outcome, the batch error first.
func refundOne(t *testing.T, s *Store, r ledger.Refund) ledger.RefundOutcome {
	t.Helper()
	out, err := s.Refund(context.Background(), []ledger.Refund{r})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func grantWith(t *testing.T, s *Store, c ledger.Credit) {
	t.Helper()
	out, err := s.Grant(context.Background(), []ledger.Credit{c})
	if err == nil {
		err = out[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

func remainingOf(t *testing.T, s *Store, merchant string) map[string]int64 {
	t.Helper()
	gs, err := s.Grants(context.Background(), []string{merchant}, 10)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, g := range gs[merchant] {
		out[g.ID] = g.Remaining
	}
	return out
}

func TestRefundOfARecordedPayment(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grantWith(t, s, ledger.Credit{ID: "g-first", MerchantID: "m", Amount: 20, Priority: 1})
	grantWith(t, s, ledger.Credit{ID: "g-second", MerchantID: "m", Amount: 100, Priority: 2})
	if err := s.Commit(ctx, []ledger.Row{debit("p1", "m", 30)}); err != nil {
		t.Fatal(err)
	}
	// p1 burned g-first whole and 10 of g-second: 10 come back to g-second first.
	o := refundOne(t, s, refundOf("r1", "p1", "m", 12))
	if o.Err != nil || o.Duplicate || o.Record.State != ledger.RefundApplied || o.Record.Returned != 12 {
		t.Fatalf("refund = %+v", o)
	}
	if got, want := remainingOf(t, s, "m"), map[string]int64{"g-first": 2, "g-second": 100}; !reflect.DeepEqual(got, want) {
		t.Errorf("remaining %v, want %v", got, want)
	}
	if b := balanceOf(t, s, "m"); b.Available() != 102 || b.HeadGrant == nil || *b.HeadGrant != "g-first" {
		t.Errorf("balance %d, head %v; want 102, g-first", b.Available(), deref2(b.HeadGrant))
	}
	// The same refund again: no effect.
	if o := refundOne(t, s, refundOf("r1", "p1", "m", 12)); !o.Duplicate || o.Err != nil {
		t.Errorf("second delivery = %+v, want a duplicate", o)
	}
	// The same id with other terms: a conflict naming what is recorded.
	o = refundOne(t, s, refundOf("r1", "p1", "m", 13))
	if !errors.Is(o.Err, ledger.ErrConflict) || !strings.Contains(o.Err.Error(), "recorded as refund of 12 of payment p1") {
		t.Errorf("other terms = %v, want a conflict naming the recorded refund", o.Err)
	}
	// Partial refunds add up to the debit; the part beyond is a conflict, not a credit.
	o = refundOne(t, s, refundOf("r2", "p1", "m", 25))
	if !errors.Is(o.Err, ledger.ErrConflict) || o.Record.Taken != 18 || o.Record.Beyond != 7 || o.Record.Returned != 18 {
		t.Errorf("over-refund = %+v, err %v; want 18 applied, 7 beyond", o.Record, o.Err)
	}
	if b := balanceOf(t, s, "m"); b.Available() != 120 {
		t.Errorf("balance %d after refunding the whole payment, want 120", b.Available())
	}
	if o := refundOne(t, s, refundOf("r3", "p1", "m", 1)); !errors.Is(o.Err, ledger.ErrConflict) || o.Record.Returned != 0 {
		t.Errorf("refund of a wholly refunded payment = %+v, %v", o.Record, o.Err)
	}
	if got, want := remainingOf(t, s, "m"), map[string]int64{"g-first": 20, "g-second": 100}; !reflect.DeepEqual(got, want) {
		t.Errorf("remaining %v, want %v", got, want)
	}
	checkBalancesMatchLedger(t, s)
	// A refund of another merchant's payment, or of a grant, is a conflict.
	if o := refundOne(t, s, refundOf("r4", "p1", "m-other", 1)); !errors.Is(o.Err, ledger.ErrConflict) {
		t.Errorf("refund of another merchant's payment = %v", o.Err)
	}
	if o := refundOne(t, s, refundOf("r5", "g-first", "m", 1)); !errors.Is(o.Err, ledger.ErrConflict) {
		t.Errorf("refund of a grant = %v", o.Err)
	}
}

func deref2(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// ledgerShape is what both orders must agree on: the balance row, the
// ledger's totals by kind, the grants' remaining and the outbox events'
// types and balances (ids name the events, which differ by merchant).
func ledgerShape(t *testing.T, s *Store, merchant string) string {
	t.Helper()
	var b strings.Builder
	bal := balanceOf(t, s, merchant)
	b.WriteString(strings.Join([]string{itoa(bal.Credited), itoa(bal.Debited), itoa(bal.Seq)}, "/") + ";")
	q := func(query string) {
		if err := s.query(t.Context(), s.db, query, []any{merchant}, func(rows *sql.Rows) error {
			var a, c, d string
			if err := rows.Scan(&a, &c, &d); err != nil {
				return err
			}
			b.WriteString(a + ":" + c + ":" + d + ",")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.WriteString(";")
	}
	q("SELECT kind, SUM(amount), COUNT(*) FROM quota_ledger WHERE merchant_id = ? GROUP BY kind ORDER BY kind")
	q("SELECT type, balance_before, balance_after FROM quota_outbox WHERE merchant_id = ? ORDER BY seq")
	q("SELECT SUBSTRING_INDEX(grant_id, '-', -1), remaining, state FROM quota_grants WHERE merchant_id = ? ORDER BY grant_id")
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestRefundInEitherOrder: a refund before its payment waits, durably, and
// applies in the transaction that records the payment; both orders end in
// the same balance, ledger totals, grants and events.
func TestRefundInEitherOrder(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for _, m := range []string{"m-after", "m-before"} {
		grantWith(t, s, ledger.Credit{ID: m + "-g1", MerchantID: m, Amount: 10, Priority: 1})
		grantWith(t, s, ledger.Credit{ID: m + "-g2", MerchantID: m, Amount: 10, Priority: 2})
	}
	// Payment then refund.
	if err := s.Commit(ctx, []ledger.Row{debit("a-p", "m-after", 15)}); err != nil {
		t.Fatal(err)
	}
	refundOne(t, s, refundOf("a-r1", "a-p", "m-after", 4))
	refundOne(t, s, refundOf("a-r2", "a-p", "m-after", 3))
	// Refunds then payment.
	for _, r := range []ledger.Refund{refundOf("b-r1", "b-p", "m-before", 4), refundOf("b-r2", "b-p", "m-before", 3)} {
		if o := refundOne(t, s, r); o.Err != nil || o.Record.State != ledger.RefundPending {
			t.Fatalf("refund before its payment = %+v, %v; want pending", o.Record, o.Err)
		}
	}
	pending, err := s.Refunds(ctx, "", true, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending = %v, %v", pending, err)
	}
	rows := []ledger.Row{debit("b-p", "m-before", 15)}
	if err := s.Commit(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if rows[0].Refunded != 7 {
		t.Errorf("Refunded = %d, want 7", rows[0].Refunded)
	}
	if pending, _ := s.Refunds(ctx, "", true, 10); len(pending) != 0 {
		t.Errorf("still pending: %v", pending)
	}
	if a, b := ledgerShape(t, s, "m-after"), ledgerShape(t, s, "m-before"); a != b {
		t.Errorf("the two orders differ:\npayment first %s\nrefund first  %s", a, b)
	}
	checkBalancesMatchLedger(t, s)
}

func TestRefundOfARejectedPaymentIsVoid(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m", 5)
	if err := s.Commit(ctx, []ledger.Row{rejected("p-rej", "m", 50, ledger.ReasonInsufficient)}); err != nil {
		t.Fatal(err)
	}
	o := refundOne(t, s, refundOf("r", "p-rej", "m", 50))
	if o.Err != nil || o.Record.State != ledger.RefundVoid || !strings.Contains(o.Record.Note, "insufficient") {
		t.Errorf("refund of a rejected payment = %+v, %v", o.Record, o.Err)
	}
	// Waiting for a payment that is then rejected: void as well.
	refundOne(t, s, refundOf("r-early", "p-rej2", "m", 50))
	if err := s.Commit(ctx, []ledger.Row{rejected("p-rej2", "m", 50, ledger.ReasonInsufficient)}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Refunds(ctx, "p-rej2", false, 10)
	if err != nil || len(recs) != 1 || recs[0].State != ledger.RefundVoid {
		t.Errorf("refunds of p-rej2 = %+v, %v", recs, err)
	}
	if b := balanceOf(t, s, "m"); b.Available() != 5 {
		t.Errorf("balance %d, want 5", b.Available())
	}
	checkBalancesMatchLedger(t, s)
}

func TestRefundDoesNotResurrectExpiredQuota(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	soon := time.Now().UTC().Add(1500 * time.Millisecond)
	for _, m := range []string{"m-used", "m-left"} {
		grantWith(t, s, ledger.Credit{ID: m + "-soon", MerchantID: m, Amount: 10, Priority: 1, ExpiresAt: &soon})
		grantWith(t, s, ledger.Credit{ID: m + "-never", MerchantID: m, Amount: 10, Priority: 2})
	}
	// m-used's payment uses its expiring grant up; m-left's leaves 4 of it.
	if err := s.Commit(ctx, []ledger.Row{debit("p-used", "m-used", 14), debit("p-left", "m-left", 6)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(soon) + 100*time.Millisecond)
	// Until m-left's expiry is recorded, its refund is refused as a payment would be.
	var due *ledger.ExpiryDueError
	if _, err := s.Refund(ctx, []ledger.Refund{refundOf("r-left", "p-left", "m-left", 6)}); !errors.As(err, &due) {
		t.Fatalf("refund with a due expiry: %v, want *ExpiryDueError", err)
	}
	if _, err := s.Expire(ctx, []string{"m-left"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		refund                   ledger.Refund
		returned, expired, avail int64
	}{
		{refundOf("r-used", "p-used", "m-used", 14), 4, 10, 10},
		{refundOf("r-left", "p-left", "m-left", 6), 0, 6, 10},
	} {
		o := refundOne(t, s, tc.refund)
		if o.Err != nil || o.Record.Returned != tc.returned || o.Record.Expired != tc.expired {
			t.Errorf("%s = %+v, %v; want %d returned, %d expired", tc.refund.ID, o.Record, o.Err, tc.returned, tc.expired)
		}
		if b := balanceOf(t, s, tc.refund.MerchantID); b.Available() != tc.avail {
			t.Errorf("%s: balance %d, want %d", tc.refund.MerchantID, b.Available(), tc.avail)
		}
	}
	checkBalancesMatchLedger(t, s)
}

func TestRefundReducesOverageFirst(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grantWith(t, s, ledger.Credit{ID: "g", MerchantID: "m", Amount: 100})
	if err := s.SetPolicy(ctx, "m", ledger.Policy{Kind: ledger.PolicyOverage}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("p1", "m", 150), debit("p2", "m", 30)}); err != nil {
		t.Fatal(err)
	}
	// p1: 100 from g, 50 overage; p2: 30 overage. Refunding p1 whole gives
	// back its 50 of overage, bills p2's 30, and returns 100 to g.
	o := refundOne(t, s, refundOf("r", "p1", "m", 150))
	if o.Err != nil || o.Record.Returned != 150 {
		t.Fatalf("refund = %+v, %v", o.Record, o.Err)
	}
	if b := balanceOf(t, s, "m"); b.Available() != 100 {
		t.Errorf("balance %d, want 100", b.Available())
	}
	if got := remainingOf(t, s, "m"); got["g"] != 100 {
		t.Errorf("remaining %v, want g: 100", got)
	}
	var kinds []string
	if err := s.query(ctx, s.db, "SELECT CONCAT(kind, ':', amount) FROM quota_ledger WHERE merchant_id = 'm' ORDER BY seq", nil, func(rows *sql.Rows) error {
		var k string
		err := rows.Scan(&k)
		kinds = append(kinds, k)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"credit:100", "debit:150", "debit:30", "refund:50", "billed:30", "refund:100"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("ledger %v, want %v", kinds, want)
	}
	checkBalancesMatchLedger(t, s)
}

func TestCancelPendingRefund(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m", 10)
	refundOne(t, s, refundOf("r", "p-never", "m", 3))
	if err := s.CancelRefund(ctx, "r", "payment never came"); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelRefund(ctx, "r", "again"); !errors.Is(err, ErrNotPending) {
		t.Errorf("second cancel = %v, want ErrNotPending", err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("p-never", "m", 5)}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, s, "m"); b.Available() != 5 {
		t.Errorf("balance %d, want 5: a cancelled refund does not apply", b.Available())
	}
}

// A refund of a merchant billing does not know yet waits too: the grant that
// creates the merchant counts it, and the payment's transaction applies it;
// a payment then rejected as unknown_merchant voids its refund.
func TestRefundBeforeTheMerchantExists(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	refundOne(t, s, refundOf("r-new", "p-new", "m-new", 2))
	refundOne(t, s, refundOf("r-ghost", "p-ghost", "m-ghost", 2))
	grant(t, s, "m-new", 10)
	if b := balanceOf(t, s, "m-new"); b.RefundsWaiting != 1 {
		t.Errorf("refunds_waiting %d after the grant that created the merchant, want 1", b.RefundsWaiting)
	}
	rows := []ledger.Row{debit("p-new", "m-new", 5), rejected("p-ghost", "m-ghost", 5, ledger.ReasonUnknownMerchant)}
	if err := s.Commit(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, s, "m-new"); b.Available() != 7 || b.RefundsWaiting != 0 {
		t.Errorf("m-new: balance %d, waiting %d; want 7, 0", b.Available(), b.RefundsWaiting)
	}
	recs, err := s.Refunds(ctx, "p-ghost", false, 10)
	if err != nil || len(recs) != 1 || recs[0].State != ledger.RefundVoid {
		t.Errorf("refund of an unknown merchant's rejected payment = %+v, %v; want void", recs, err)
	}
	checkBalancesMatchLedger(t, s)
}

// A refund waiting for a payment that is then recorded for another merchant
// is a conflict no payment's transaction looks for: delivered again, it
// settles as void with the conflict as its note, and gives nothing back.
func TestWaitingRefundOfAnotherMerchantsPayment(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	grant(t, s, "m-a", 10)
	grant(t, s, "m-b", 10)
	refundOne(t, s, refundOf("r", "p", "m-a", 3))
	if err := s.Commit(ctx, []ledger.Row{debit("p", "m-b", 5)}); err != nil {
		t.Fatal(err)
	}
	o := refundOne(t, s, refundOf("r", "p", "m-a", 3))
	if !o.Duplicate || o.Record.State != ledger.RefundVoid {
		t.Errorf("delivered again: %+v", o)
	}
	recs, err := s.Refunds(ctx, "p", false, 10)
	if err != nil || len(recs) != 1 || recs[0].State != ledger.RefundVoid || !strings.Contains(recs[0].Note, "recorded for merchant m-b") {
		t.Errorf("refunds of p: %+v, %v", recs, err)
	}
	for m, want := range map[string]int64{"m-a": 10, "m-b": 5} {
		if b := balanceOf(t, s, m); b.Available() != want || b.RefundsWaiting != 0 {
			t.Errorf("%s: balance %d, waiting %d; want %d, 0", m, b.Available(), b.RefundsWaiting, want)
		}
	}
}
