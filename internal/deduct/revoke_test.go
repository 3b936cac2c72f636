package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// revoke revokes and checks the outcome and amount.
func (e *env) revoke(merchant, id string, want ledger.RevokeOutcome, wantAmount int64) {
	e.t.Helper()
	owner, got, amount, err := e.d.Revoke(context.Background(), merchant, id)
	if err != nil || got != want || amount != wantAmount || owner != "m" {
		e.t.Fatalf("revoke %s = %s, %s, %d, %v; want m, %s, %d", id, owner, got, amount, err, want, wantAmount)
	}
}

// The unused remainder of a revoked grant leaves through one expire row
// (reason revoked), once; used-up, expired and unknown grants write nothing.
func TestRevoke(t *testing.T) {
	e := newEnv(t)
	past := time.Now().Add(-time.Hour)
	e.grantTerms("g1", "m", 100, 1, nil, 0)
	e.grantTerms("g2", "m", 50, 2, nil, 0)
	e.grantTerms("small", "m", 5, 0, nil, 0)
	if r := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 20), pay("e2", "m", 15)}); r[0].Outcome != Applied || r[1].Outcome != Applied {
		t.Fatalf("payments = %+v", r)
	}
	e.revoke("", "g1", ledger.Revoked, 70)
	if remain, _ := e.quota("m"); remain != -1 {
		t.Errorf("Redis remain %d after a revoke, want the hash dropped", remain)
	}
	if b := e.balance("m"); b.Available() != 50 || b.LowBase != 50 {
		t.Errorf("balance %+v, want 50 available and low_base 50", b)
	}
	g := e.grants("m")["g1"]
	if g.State != ledger.GrantExpired || g.Remaining != 0 || g.EndedAt == nil {
		t.Errorf("revoked grant %+v, want expired with nothing left", g)
	}
	rows := len(e.rows("m"))
	e.revoke("m", "g1", ledger.AlreadyRevoked, 70)
	e.revoke("", "small", ledger.NothingLeft, 0) // used up by the first payment
	if n := len(e.rows("m")); n != rows {
		t.Errorf("%d rows after revoking twice and a used-up grant, want %d", n, rows)
	}
	prio := 1
	if _, err := e.d.GrantBatch(context.Background(), []event.GrantCommand{{GrantID: "late", MerchantID: "m", Amount: 9, Priority: &prio, ExpiresAt: &past}}); err != nil {
		t.Fatal(err)
	}
	e.revoke("m", "late", ledger.NothingLeft, 0) // its expiry, due, is recorded as one
	for _, tc := range []struct{ merchant, id string }{{"", "nope"}, {"other", "g2"}} {
		if _, _, _, err := e.d.Revoke(context.Background(), tc.merchant, tc.id); !errors.Is(err, ledger.ErrUnknownGrant) {
			t.Errorf("revoke %s of %q: %v, want ErrUnknownGrant", tc.id, tc.merchant, err)
		}
	}
	if r := e.apply(e.d, []event.PaymentSucceeded{pay("e3", "m", 50)}); r[0].Outcome != Applied || r[0].BalanceAfter != 0 {
		t.Errorf("payment of the rest = %+v, want applied down to 0", r[0])
	}
	var kinds []string
	all := e.rows("m")
	for _, r := range all {
		if r.Kind == ledger.KindExpire {
			kinds = append(kinds, fmt.Sprintf("%s:%s:%d", r.EventID, r.Reason, r.Amount))
		}
	}
	if fmt.Sprint(kinds) != "[revoke:g1:revoked:70 expire:late:expiry:9]" {
		t.Errorf("expire rows %v", kinds)
	}
	rep := ledger.Replay(all, map[string]ledger.Balance{"m": e.balance("m")}, quotaevent.Alerts{})["m"]
	if b := e.balance("m"); len(rep.Faults) > 0 || rep.Credited != b.Credited || rep.Debited != b.Debited || rep.Base != b.LowBase {
		t.Errorf("replay %+v, balance %+v", rep, b)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// A revoke racing payment batches: one revoke row, every debit before it paid
// by the revoked grant, every one after by the other, nothing lost.
func TestRevokeDuringPayments(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.grantTerms("g1", "m", 100000, 1, nil, 0)
	e.grantTerms("g2", "m", 100000, 2, nil, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	started := make(chan struct{})
	for w := range 3 {
		d := e.newDeductor()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 40 {
				batch := make([]event.PaymentSucceeded, 4)
				for k := range batch {
					batch[k] = pay(fmt.Sprintf("w%d-%d-%d", w, n, k), "m", 1)
				}
				if _, err := d.Apply(ctx, batch); err != nil {
					errs <- err
					return
				}
				if w == 0 && n == 0 {
					close(started)
				}
			}
		}()
	}
	<-started
	if _, out, _, err := e.newDeductor().Revoke(ctx, "m", "g1"); err != nil || out != ledger.Revoked {
		t.Errorf("revoke = %s, %v", out, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rows := e.rows("m")
	slices.SortFunc(rows, func(a, b ledger.Row) int { return int(value(a.Seq) - value(b.Seq)) })
	var before, after, revoked int64
	seen := false
	for _, r := range rows {
		switch {
		case r.Kind == ledger.KindExpire:
			if seen || r.EventID != ledger.RevokeID("g1") {
				t.Fatalf("expire row %s (another before: %v)", r.EventID, seen)
			}
			seen, revoked = true, r.Amount
		case r.Kind == ledger.KindDebit && !seen:
			before++
			if grantOf(r) != "g1" {
				t.Errorf("debit %s before the revoke paid by %q", r.EventID, grantOf(r))
			}
		case r.Kind == ledger.KindDebit:
			after++
			if grantOf(r) != "g2" {
				t.Errorf("debit %s after the revoke paid by %q", r.EventID, grantOf(r))
			}
		}
	}
	if !seen || before == 0 || before+after != 480 || before+revoked != 100000 {
		t.Errorf("before %d, after %d, revoked %d: want before > 0, 480 debits and before + revoked = 100000", before, after, revoked)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}
