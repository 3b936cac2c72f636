package deduct

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/shard"
)

// The tests of where two features meet (thresholds and the outbox, shards and
// the ledger's order, overage and grants, grants and concurrent batches).

// withEvents makes the env's store and Deductor write balance events with
// the default thresholds def.
func (e *env) withEvents(def quotaevent.Alerts) {
	e.t.Helper()
	s, err := ledgerdb.New(e.mysql.SQL, e.ids, nil, ledgerdb.Options{Events: ledgerdb.Events{DefaultAlerts: def}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = s
	e.d = e.newDeductor()
}

// outbox lists the balance events' ids of a merchant in publication order.
func (e *env) outbox(merchant string) []string {
	e.t.Helper()
	var ids []string
	if err := e.mysql.DB.Raw("SELECT id FROM quota_outbox WHERE merchant_id = ? ORDER BY seq", merchant).Scan(&ids).Error; err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// replayed is what ledger.Replay says of the merchant's recorded rows.
func (e *env) replayed(merchant string, def quotaevent.Alerts) *ledger.Replayed {
	e.t.Helper()
	var rows []ledger.Row
	if err := e.mysql.DB.Where("merchant_id = ?", merchant).Find(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	r := ledger.Replay(rows, e.balances(), def)[merchant]
	if r == nil {
		return &ledger.Replayed{}
	}
	return r
}

func eventIDs(evs []quotaevent.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// The README's own example, 1000 units and 10%, with 10,000 granted: both
// thresholds are 1000. A payment crossing them writes one quota.low, and the
// merchant goes on paying (it used to fail on the outbox's unique id, as did
// the grant that lifted it back).
func TestEqualThresholdsAreOneCrossing(t *testing.T) {
	e := newEnv(t)
	def := quotaevent.Alerts{Units: 1000, Percent: 10}
	e.withEvents(def)
	e.grantTerms("g-plan", "m", 10_000, ledger.DefaultPriority, nil, 0)
	res := e.apply(e.d, []event.PaymentSucceeded{pay("e-1", "m", 9_500)})
	if res[0].Outcome != Applied {
		t.Fatalf("9,500 of 10,000: %+v, want applied", res[0])
	}
	e.grantTerms("g-top-up", "m", 500, ledger.DefaultPriority, nil, 0)
	res = e.apply(e.d, []event.PaymentSucceeded{pay("e-2", "m", 100)})
	if res[0].Outcome != Applied || res[0].BalanceAfter != 900 {
		t.Fatalf("a later payment: %+v, want applied at 900", res[0])
	}
	// The top-up to 1000 recovers both: 10% is now of 1000.
	want := []string{"g-plan/quota.granted", "e-1/quota.low/1000", "g-top-up/quota.granted", "g-top-up/quota.recovered/100", "g-top-up/quota.recovered/1000", "e-2/quota.low/1000"}
	if got := e.outbox("m"); !slices.Equal(got, want) {
		t.Errorf("outbox %v, want %v", got, want)
	}
	if got := eventIDs(e.replayed("m", def).Events); !slices.Equal(got, want) {
		t.Errorf("the ledger replays to %v, want %v", got, want)
	}
}

// A percentage threshold is of what the merchant holds after its last grant
// or expiry, not of everything ever granted: with a plan that grants 1,000 a
// period, 10% stays 100 units period after period.
func TestPercentThresholdFollowsThePeriod(t *testing.T) {
	e := newEnv(t)
	def := quotaevent.Alerts{Percent: 10}
	e.withEvents(def)
	for period := range 3 {
		id := fmt.Sprintf("g-%d", period)
		e.grantTerms(id, "m", 1000, ledger.DefaultPriority, nil, 0)
		before := e.balance("m").Available()
		e.apply(e.d, []event.PaymentSucceeded{pay(fmt.Sprintf("e-%d", period), "m", before-99)})
	}
	want := []string{"g-0/quota.granted", "e-0/quota.low/100", "g-1/quota.granted", "g-1/quota.recovered/109",
		"e-1/quota.low/109", "g-2/quota.granted", "g-2/quota.recovered/109", "e-2/quota.low/109"}
	if got := e.outbox("m"); !slices.Equal(got, want) {
		t.Errorf("outbox %v, want %v", got, want)
	}
}

// skewedIDs is an IDSource of a worker whose clock is ahead (or behind) of
// another's by offset: its ids sort after (before) the other's.
type skewedIDs struct {
	*counterIDs
	offset int64
}

func (s skewedIDs) NextIDs(dst []int64) error {
	if err := s.counterIDs.NextIDs(dst); err != nil {
		return err
	}
	for i := range dst {
		dst[i] += s.offset
	}
	return nil
}

// Two workers whose clocks differ: the one ahead commits first, with the
// larger ids. The ledger's order is still the order the balance moved: each
// row's balance_after follows from the one before it, and a reader paging the
// read API after the first commit finds the second row on its next page.
func TestLedgerOrderIsCommitOrderAcrossSkewedWorkers(t *testing.T) {
	e := newEnv(t)
	ahead, err := ledgerdb.New(e.mysql.SQL, skewedIDs{e.ids, 1 << 40}, nil, ledgerdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dAhead, err := New(e.redis.Client, e.redis.Keys, e.locker, ahead, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.grant("m", 1000)
	e.apply(dAhead, []event.PaymentSucceeded{pay("e-ahead", "m", 300)})
	page, err := e.store.MerchantRows(context.Background(), "m", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	cursor := page[len(page)-1]
	e.apply(e.d, []event.PaymentSucceeded{pay("e-behind", "m", 200)})
	next, err := e.store.MerchantRows(context.Background(), "m", value(cursor.Seq), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 1 || next[0].EventID != "e-behind" {
		t.Fatalf("the page after %s holds %d rows %v, want e-behind", cursor.EventID, len(next), next)
	}
	e.checkLedgerOrder("m")
}

// checkLedgerOrder holds the merchant's ledger, in the read API's order, to
// its replay: seq 1, 2, 3 ... and every balance_after as the rows imply.
func (e *env) checkLedgerOrder(merchant string) {
	e.t.Helper()
	rows := e.rows(merchant)
	want := e.replayed(merchant, quotaevent.Alerts{})
	for _, f := range want.Faults {
		e.t.Errorf("%s: %s", merchant, f)
	}
	for k, r := range rows {
		if value(r.Seq) != int64(k+1) || k >= len(want.After) || value(r.BalanceAfter) != want.After[k] {
			e.t.Fatalf("%s: row %d of the ledger is %s (seq %v) at balance %v; its replay says %v", merchant, k+1, r.EventID, value(r.Seq), value(r.BalanceAfter), want.After)
		}
	}
	if b := e.balance(merchant); b.Seq != int64(len(rows)) || b.Credited != want.Credited || b.Debited != want.Debited {
		e.t.Errorf("%s: balance row %+v, its ledger replays to %+v", merchant, b, want.Standing)
	}
}

// Two shards of one merchant commit at the same time, many times over: the
// ledger's order is the order its balance moved, whoever took ids first.
func TestLedgerOrderIsCommitOrderAcrossShards(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	e.grant("m", 100_000)
	e.reshard(c, "m", 2)
	var byShard [2][]event.PaymentSucceeded
	for i := range 600 {
		ev := pay(fmt.Sprintf("e-%d", i), "m", 7)
		s := shard.Of(ev.EventID, 2)
		byShard[s] = append(byShard[s], ev)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for s := range byShard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := byShard[s]
			for i := 0; i < len(evs); i += 3 {
				if _, err := e.d.Apply(context.Background(), evs[i:min(i+3, len(evs))]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.checkLedgerOrder("m")
}

// A merchant's first ledger row is an unknown_merchant rejection; its first
// grant creates it and recovers nothing, by the outbox and by the replay.
func TestFirstGrantAfterAnUnknownMerchantRejection(t *testing.T) {
	e := newEnv(t)
	def := quotaevent.Alerts{Units: 10}
	e.withEvents(def)
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("e-0", "m", 5)}); res[0].Outcome != UnknownMerchant {
		t.Fatalf("a payment before any grant: %+v", res[0])
	}
	e.grantTerms("g-1", "m", 100, ledger.DefaultPriority, nil, 0)
	want := []string{"g-1/quota.granted"}
	if got := e.outbox("m"); !slices.Equal(got, want) {
		t.Errorf("outbox %v, want %v", got, want)
	}
	if got := eventIDs(e.replayed("m", def).Events); !slices.Equal(got, want) {
		t.Errorf("the ledger replays to %v, want %v", got, want)
	}
}

// Under the overage policy the units a merchant used beyond its grants are
// billed: the next grant first takes them off the balance with a billed row
// (back to 0), then credits in full. Under floor N the debt is the
// merchant's, and a grant repays it.
func TestOverageIsBilledNotRepaid(t *testing.T) {
	e := newEnv(t)
	e.withEvents(quotaevent.Alerts{})
	ctx := context.Background()
	for _, m := range []string{"over", "floor"} {
		e.grantTerms("g-1-"+m, m, 100, ledger.DefaultPriority, nil, 0)
	}
	if err := e.d.SetPolicy(ctx, "over", ledger.Policy{Kind: ledger.PolicyOverage}); err != nil {
		t.Fatal(err)
	}
	if err := e.d.SetPolicy(ctx, "floor", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 100}); err != nil {
		t.Fatal(err)
	}
	e.apply(e.d, []event.PaymentSucceeded{pay("e-over", "over", 150), pay("e-floor", "floor", 150)})
	for _, m := range []string{"over", "floor"} {
		e.grantTerms("g-2-"+m, m, 100, ledger.DefaultPriority, nil, 0)
	}
	if b := e.balance("over"); b.Available() != 100 {
		t.Errorf("overage: balance %d after the second grant, want 100 (the 50 over are billed, not repaid)", b.Available())
	}
	if b := e.balance("floor"); b.Available() != 50 {
		t.Errorf("floor: balance %d after the second grant, want 50 (the debt of 50 is repaid)", b.Available())
	}
	var kinds []string
	for _, r := range e.rows("over") {
		kinds = append(kinds, fmt.Sprintf("%s:%d:%d", r.Kind, r.Amount, value(r.BalanceAfter)))
	}
	if want := "credit:100:100 debit:150:-50 billed:50:0 credit:100:100"; strings.Join(kinds, " ") != want {
		t.Errorf("ledger of the overage merchant %q, want %q", strings.Join(kinds, " "), want)
	}
	wantEvents := []string{"g-1-over/quota.granted", "billed:g-2-over/quota.overage_billed", "g-2-over/quota.granted"}
	if got := e.outbox("over"); !slices.Equal(got, wantEvents) {
		t.Errorf("outbox %v, want %v", got, wantEvents)
	}
	for _, m := range []string{"over", "floor"} {
		e.checkLedgerOrder(m)
		e.checkGrantsBackBalance(m)
	}
	e.checkConsistent()
}

// Batches of disjoint merchants, each merchant with several grants so that
// every batch reads and moves grant rows, run at once: no deadlock. Under
// REPEATABLE READ the grants' locking read by (merchant_id, state) took gap
// locks next to other merchants' grants, and such batches deadlocked.
func TestDisjointBatchesDoNotDeadlock(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	m, err := ledgerdb.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if e.store, err = ledgerdb.New(e.mysql.SQL, e.ids, m, ledgerdb.Options{}); err != nil {
		t.Fatal(err)
	}
	e.d = e.newDeductor()
	const lanes, merchantsPerLane, rounds = 4, 6, 40
	for l := range lanes {
		for k := range merchantsPerLane {
			id := fmt.Sprintf("m-%d-%d", l, k)
			for g := range 4 {
				e.grantTerms(fmt.Sprintf("g-%s-%d", id, g), id, 5, ledger.DefaultPriority+g, nil, 0)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				var batch []event.PaymentSucceeded
				for k := range merchantsPerLane {
					batch = append(batch, pay(fmt.Sprintf("e-%d-%d-%d", l, k, r), fmt.Sprintf("m-%d-%d", l, k), 1))
				}
				if _, err := e.d.Apply(context.Background(), batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "billing_ledger_deadlock_retries_total" {
			if n := f.GetMetric()[0].GetCounter().GetValue(); n != 0 {
				t.Errorf("%v ledger transactions were retried after a deadlock, want none", n)
			}
		}
	}
	e.checkConsistent()
}
