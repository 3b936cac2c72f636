package deduct

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/plan"
)

// grantTerms grants with a priority and an expiry (nil: never).
func (e *env) grantTerms(id, merchant string, amount int64, prio int, exp *time.Time, rollover int64) {
	e.t.Helper()
	res, err := e.d.GrantBatch(context.Background(), []event.GrantCommand{{GrantID: id, MerchantID: merchant, Amount: amount,
		Priority: &prio, ExpiresAt: exp, RolloverMax: rollover}})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("grant %s: %v, %v", id, err, res[0].Err)
	}
}

// rows is the merchant's ledger, by id.
func (e *env) rows(merchant string) []ledger.Row {
	e.t.Helper()
	rows, err := e.store.MerchantRows(context.Background(), merchant, 0, 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

func (e *env) grants(merchant string) map[string]ledger.Grant {
	e.t.Helper()
	gs, err := e.store.Grants(context.Background(), []string{merchant}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]ledger.Grant{}
	for _, g := range gs[merchant] {
		out[g.ID] = g
	}
	return out
}

// checkGrantsBackBalance: the active grants' remaining sums to max(available, 0).
func (e *env) checkGrantsBackBalance(merchant string) {
	e.t.Helper()
	var sum int64
	for _, g := range e.grants(merchant) {
		if g.State == ledger.GrantActive {
			sum += g.Remaining
		}
	}
	if a := e.balance(merchant).Available(); sum != max(0, a) {
		e.t.Errorf("%s: grants' remaining sums to %d, available is %d", merchant, sum, a)
	}
}

func grantOf(r ledger.Row) string {
	if r.GrantID == nil {
		return ""
	}
	return *r.GrantID
}

// waitExpired runs the expirer until MySQL's clock passes at and it recorded something.
func (e *env) waitExpired(d *Deductor, at time.Time) {
	e.t.Helper()
	time.Sleep(time.Until(at))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		n, err := d.ExpireDue(context.Background(), 100)
		if err != nil {
			e.t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	e.t.Fatal("nothing expired within 30s")
}

// The issue's case: 100 at priority 1 expiring soon, 100 at priority 2
// forever; pay 30; after expiry one expire row of 70, MySQL and Redis say 100,
// and the next payment is the second grant's.
func TestExpiryEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	exp := time.Now().Add(2 * time.Second)
	e.grantTerms("g1", "m", 100, 1, &exp, 0)
	e.grantTerms("g2", "m", 100, 2, nil, 0)

	if res := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 30)}); res[0].Outcome != Applied || res[0].BalanceAfter != 170 {
		t.Fatalf("payment before expiry = %+v", res[0])
	}
	e.waitExpired(e.d, exp)
	if n, err := e.d.ExpireDue(ctx, 100); err != nil || n != 0 {
		t.Fatalf("a second expirer run found %d, %v", n, err)
	}

	var expires []ledger.Row
	for _, r := range e.rows("m") {
		switch {
		case r.Kind == ledger.KindExpire:
			expires = append(expires, r)
		case r.EventID == "e1" && grantOf(r) != "g1":
			t.Errorf("e1 paid by %q, want g1", grantOf(r))
		}
	}
	if len(expires) != 1 || expires[0].Amount != 70 || expires[0].EventID != "expire:g1" || grantOf(expires[0]) != "g1" || *expires[0].BalanceAfter != 100 {
		t.Fatalf("expire rows = %+v, want one of 70 for g1", expires)
	}
	if a := e.balance("m").Available(); a != 100 {
		t.Errorf("MySQL available = %d, want 100", a)
	}
	// A payment too big for what is left hydrates Redis and is rejected: Redis says 100.
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("big", "m", 150)}); res[0].Outcome != Insufficient {
		t.Errorf("payment of 150 after expiry = %+v", res[0])
	}
	if remain, _ := e.quota("m"); remain != 100 {
		t.Errorf("Redis remain = %d, want 100", remain)
	}
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("e2", "m", 10)}); res[0].Outcome != Applied || res[0].BalanceAfter != 90 {
		t.Fatalf("payment after expiry = %+v", res[0])
	}
	rows := e.rows("m")
	if last := rows[len(rows)-1]; last.EventID != "e2" || grantOf(last) != "g2" {
		t.Errorf("e2 paid by %q, want g2", grantOf(last))
	}
	gs := e.grants("m")
	if gs["g1"].State != ledger.GrantExpired || gs["g2"].Remaining != 90 || gs["g2"].State != ledger.GrantActive {
		t.Errorf("grants = %+v", gs)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// Without the expirer, the first payment after the expiry finds MySQL's
// guard refusing it: the expiry is recorded then, and the payment is the
// next grant's. A crash after the payment's Redis deduction, before its
// commit, then a redelivery after the expiry, ends the same way.
func TestExpiryAtPaymentAndRedelivery(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			exp := time.Now().Add(1500 * time.Millisecond)
			e.grantTerms("g1", "m", 100, 1, &exp, 0)
			e.grantTerms("g2", "m", 100, 2, nil, 0)
			e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 30)})
			if crash {
				dying := e.newDeductor()
				dying.afterStep = func(s string) error {
					if s == stepDeducted {
						return errKilled
					}
					return nil
				}
				if _, err := dying.Apply(ctx, []event.PaymentSucceeded{pay("e2", "m", 5)}); !errors.Is(err, errKilled) {
					t.Fatalf("dying Apply = %v", err)
				}
				if err := e.redis.Client.Del(ctx, e.redis.Keys.Lock("m")).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Until(exp) + 100*time.Millisecond)
			res := e.apply(e.newDeductor(), []event.PaymentSucceeded{pay("e2", "m", 5)})
			if res[0].Outcome != Applied || res[0].BalanceAfter != 95 {
				t.Fatalf("payment after expiry = %+v", res[0])
			}
			var expired int64
			for _, r := range e.rows("m") {
				if r.Kind == ledger.KindExpire {
					expired += r.Amount
				}
				if r.EventID == "e2" && grantOf(r) != "g2" {
					t.Errorf("e2 paid by %q, want g2", grantOf(r))
				}
			}
			if expired != 70 {
				t.Errorf("expired %d, want 70", expired)
			}
			e.checkGrantsBackBalance("m")
			e.checkConsistent()
		})
	}
}

// Payments keep coming from several workers across the expiry: every debit
// committed before the expire row is the expiring grant's, every one after
// is the next grant's, and what expired is what the first grant had left.
func TestExpiryBoundaryUnderConcurrentPayments(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exp := time.Now().Add(1500 * time.Millisecond)
	e.grantTerms("g1", "m", 100000, 1, &exp, 0)
	e.grantTerms("g2", "m", 100000, 2, nil, 0)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := time.Now().Add(3 * time.Second)
	for w := range 3 {
		d := e.newDeductor()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				batch := make([]event.PaymentSucceeded, 4)
				for k := range batch {
					batch[k] = pay(fmt.Sprintf("w%d-%d-%d", w, n, k), "m", 1)
				}
				if _, err := d.Apply(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Two expirers race with the payments and with each other.
	for range 2 {
		d := e.newDeductor()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, err := d.ExpireDue(ctx, 10); err != nil {
					errs <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var before, after, expired int64
	seenExpire := false
	for _, r := range e.rows("m") {
		switch {
		case r.Kind == ledger.KindExpire:
			if seenExpire {
				t.Fatal("two expire rows")
			}
			seenExpire, expired = true, r.Amount
		case r.Kind == ledger.KindDebit && !seenExpire:
			before++
			if grantOf(r) != "g1" {
				t.Errorf("debit %s before the expiry paid by %q", r.EventID, grantOf(r))
			}
		case r.Kind == ledger.KindDebit:
			after++
			if grantOf(r) != "g2" {
				t.Errorf("debit %s after the expiry paid by %q", r.EventID, grantOf(r))
			}
		}
	}
	if !seenExpire || before == 0 || after == 0 || before+expired != 100000 {
		t.Errorf("before %d, after %d, expired %d: want both sides and before + expired = 100000", before, after, expired)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// Two expirers at once on the ledger alone (no merchant lock between them):
// one expire row, the balance moved once.
func TestTwoExpirersAtOnce(t *testing.T) {
	e := newEnv(t)
	exp := time.Now().Add(time.Second)
	e.grantTerms("g1", "m", 40, 1, &exp, 0)
	e.grantTerms("g2", "m", 10, 2, nil, 0)
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	var wg sync.WaitGroup
	moved := make([][]string, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			moved[i], errs[i] = e.newStore().Expire(context.Background(), []string{"m"})
		}()
	}
	wg.Wait()
	n := 0
	for i := range moved {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		n += len(moved[i])
	}
	if n != 1 {
		t.Errorf("%d expirers moved the balance, want 1", n)
	}
	if a := e.balance("m").Available(); a != 10 {
		t.Errorf("available = %d, want 10", a)
	}
	e.checkGrantsBackBalance("m")
}

// A grant whose expires_at has passed when it arrives (issued late for a
// period that has ended) is recorded and expires at once through the expiry
// path: its credit and one expire row of all of it, nothing left to pay with.
// With its period's starts_at its rollover lasts as long as the period did. A
// zero expires_at or starts_at is invalid, never "no expiry" or "now"; so is a
// starts_at in the future (it would be spent before its period starts).
func TestGrantExpiredOnArrival(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	start := past.Add(-30 * 24 * time.Hour)
	future := time.Now().Add(time.Hour)
	prio := 1
	res, err := e.d.GrantBatch(ctx, []event.GrantCommand{
		{GrantID: "late", MerchantID: "m", Amount: 100, Priority: &prio, ExpiresAt: &past},
		{GrantID: "late-period", MerchantID: "m", Amount: 40, Priority: &prio, ExpiresAt: &past, StartsAt: &start, RolloverMax: 15},
		{GrantID: "zero-expiry", MerchantID: "m", Amount: 1, ExpiresAt: &time.Time{}},
		{GrantID: "zero-start", MerchantID: "m", Amount: 1, StartsAt: &time.Time{}},
		{GrantID: "next-period", MerchantID: "m", Amount: 1, StartsAt: &future},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Outcome{Applied, Applied, Invalid, Invalid, Invalid} {
		if res[i].Outcome != want {
			t.Errorf("grant %d = %+v, want %s", i, res[i], want)
		}
	}
	e.waitExpired(e.d, time.Now())
	var kinds []string
	for _, row := range e.rows("m") {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%d", row.Kind, row.EventID, row.Amount))
	}
	if fmt.Sprint(kinds) != "[credit:late:100 credit:late-period:40 expire:expire:late:100 expire:expire:late-period:40 credit:rollover:late-period:15]" {
		t.Errorf("ledger = %v", kinds)
	}
	if r := e.grants("m")["rollover:late-period"]; r.State != ledger.GrantActive || r.ExpiresAt == nil || !r.ExpiresAt.Equal(past.Add(past.Sub(start))) {
		t.Errorf("rollover grant = %+v, want active until %v", r, past.Add(past.Sub(start)))
	}
	if r := e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 16)}); r[0].Outcome != Insufficient {
		t.Errorf("a payment of more than the rollover = %+v, want insufficient", r[0])
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// A grant with rollover_max carries up to that much into a new grant whose
// id derives from it; the expiry's replay creates nothing twice.
func TestRollover(t *testing.T) {
	e := newEnv(t)
	// The grant's period began an hour ago: its rollover lasts an hour, not
	// the second left of it, however slow the machine is to record the expiry.
	start, exp, prio := time.Now().Add(-time.Hour), time.Now().Add(time.Second), 1
	res, err := e.d.GrantBatch(context.Background(), []event.GrantCommand{{GrantID: "p1", MerchantID: "m", Amount: 100,
		Priority: &prio, StartsAt: &start, ExpiresAt: &exp, RolloverMax: 25}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("grant p1: %v, %v", err, res[0].Err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 40)})
	e.waitExpired(e.d, exp)
	if _, err := e.store.Expire(context.Background(), []string{"m"}); err != nil {
		t.Fatal(err)
	}
	gs := e.grants("m")
	r := gs["rollover:p1"]
	if r.State != ledger.GrantActive || r.Amount != 25 || r.Remaining != 25 || r.Priority != 1 || r.ExpiresAt == nil || r.RolloverMax != 0 {
		t.Fatalf("rollover grant = %+v", r)
	}
	var kinds []string
	for _, row := range e.rows("m") {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%d", row.Kind, row.EventID, row.Amount))
	}
	if fmt.Sprint(kinds) != "[credit:p1:100 debit:e1:40 expire:expire:p1:60 credit:rollover:p1:25]" {
		t.Errorf("ledger = %v", kinds)
	}
	if a := e.balance("m").Available(); a != 25 {
		t.Errorf("available = %d, want 25", a)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// Under an overdraft floor a debt is paid back by the next grant first, so
// the grants' remaining stays max(available, 0).
func TestGrantPaysBackDebt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.grantTerms("g1", "m", 10, 1, nil, 0)
	if err := e.d.SetPolicy(ctx, "m", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 20}); err != nil {
		t.Fatal(err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 4), pay("e2", "m", 12), pay("e3", "m", 3)})
	e.checkGrantsBackBalance("m")
	e.grantTerms("g2", "m", 30, 1, nil, 0)
	if g := e.grants("m")["g2"]; g.Remaining != 21 {
		t.Errorf("g2 remaining = %d, want 30 - 9 owed = 21", g.Remaining)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("e4", "m", 1)})
	rows := e.rows("m")
	if last := rows[len(rows)-1]; grantOf(last) != "g2" {
		t.Errorf("e4 paid by %q", grantOf(last))
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// A recurring plan through the one grant path: the scheduler, down at the
// period start, issues the current period's grant late (expiring at the
// period's end); at that end the remainder rolls over up to the plan's max
// beside the next period's grant.
func TestPlanPeriodsWithRollover(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	plans := plan.NewStore(e.mysql.SQL)
	issue := func(ctx context.Context, g event.GrantCommand) error {
		res, err := e.d.GrantBatch(ctx, []event.GrantCommand{g})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	sched := plan.NewScheduler(plans, issue)
	// Plans are for merchants billing knows: m has a balance row, still empty.
	if err := e.mysql.DB.Exec("INSERT INTO merchant_balance (merchant_id) VALUES ('m')").Error; err != nil {
		t.Fatal(err)
	}
	anchor := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	if err := plans.Set(ctx, plan.Plan{MerchantID: "m", Amount: 100, Every: plan.Every{Duration: 2 * time.Second}, RolloverMax: 10, Priority: 1, Anchor: anchor}); err != nil {
		t.Fatal(err)
	}
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("e1", "m", 30)})
	p, _, _ := plans.Get(ctx, "m")
	e.waitExpired(e.d, p.NextStart)
	if n, err := sched.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce at the next period = %d, %v", n, err)
	}
	if a := e.balance("m").Available(); a != 110 {
		t.Errorf("available = %d, want 100 + 10 rolled over", a)
	}
	var expired int64
	for _, r := range e.rows("m") {
		if r.Kind == ledger.KindExpire {
			expired += r.Amount
		}
	}
	if expired != 70 {
		t.Errorf("expired %d, want 70", expired)
	}
	e.checkGrantsBackBalance("m")
	e.checkConsistent()
}

// A sharded merchant: the batch that meets the expiry holds only some
// shards; it drops them, and their next events rebalance every shard from
// MySQL (the wide pass), so no shard keeps what expired.
func TestExpiryOfShardedMerchant(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	d := e.shardedDeductor(c)
	exp := time.Now().Add(1500 * time.Millisecond)
	e.grantTerms("g1", "m", 100, 1, &exp, 0)
	e.grantTerms("g2", "m", 1000, 2, nil, 0)
	e.reshard(c, "m", 4)
	var batch []event.PaymentSucceeded
	for i := range 20 {
		batch = append(batch, pay(fmt.Sprintf("a%d", i), "m", 1))
	}
	e.apply(d, batch)
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	for round := range 3 {
		batch = batch[:0]
		for i := range 20 {
			batch = append(batch, pay(fmt.Sprintf("b%d-%d", round, i), "m", 1))
		}
		for _, r := range e.apply(d, batch) {
			if r.Outcome != Applied {
				t.Fatalf("payment after expiry: %+v", r)
			}
		}
	}
	var expired int64
	for _, r := range e.rows("m") {
		if r.Kind == ledger.KindExpire {
			expired += r.Amount
		}
		if r.Kind == ledger.KindDebit && r.EventID[0] == 'b' && grantOf(r) != "g2" {
			t.Errorf("%s paid by %q after the expiry", r.EventID, grantOf(r))
		}
	}
	if expired != 80 {
		t.Errorf("expired %d, want 80", expired)
	}
	// The shards present hold no more than MySQL: none kept what expired.
	remain, inFlight, present := e.shardState("m", 4)
	if a := e.balance("m").Available(); remain+inFlight > a || (present == 4 && remain+inFlight != a) {
		t.Errorf("%d shards hold %d (+%d in flight), MySQL %d", present, remain, inFlight, a)
	}
	e.checkGrantsBackBalance("m")
}

// A merchant whose expiry cannot be recorded (here: its expire row's id is
// taken, as hand-made data could do) holds up no other merchant's.
func TestExpiryOfOneMerchantDoesNotHoldUpOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	exp := time.Now().Add(500 * time.Millisecond)
	e.grantTerms("g-stuck", "m-stuck", 100, 1, &exp, 0)
	e.grantTerms("g-fine", "m-fine", 100, 1, &exp, 0)
	if err := e.mysql.DB.Exec(`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, occurred_at)
		VALUES (999999, ?, 'm-other', 'rejected', 1, NOW())`, ledger.ExpireID("g-stuck")).Error; err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	n, err := e.d.ExpireDue(ctx, 10)
	if n != 2 || err == nil || !strings.Contains(err.Error(), "m-stuck") || strings.Contains(err.Error(), "m-fine") {
		t.Fatalf("ExpireDue = %d, %v; want 2 due and only m-stuck failing", n, err)
	}
	if b := e.balance("m-fine"); b.Available() != 0 {
		t.Errorf("m-fine still has %d after its grant expired", b.Available())
	}
}
