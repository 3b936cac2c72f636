package deduct

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/shard"
)

// shards gives the env's Deductors a shard store on the test database; the
// returned cache is refreshed by reshard, as a worker's would be within a second.
func (e *env) shards() *shard.Cache {
	e.t.Helper()
	db, err := e.mysql.DB.DB()
	if err != nil {
		e.t.Fatal(err)
	}
	c := shard.NewCache(shard.NewStore(db), 0, nil)
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, e.store, nil, nil, Options{Shards: c})
	if err != nil {
		e.t.Fatal(err)
	}
	e.d = d
	return c
}

func (e *env) shardedDeductor(c *shard.Cache) *Deductor {
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, e.store, nil, nil, Options{Shards: c})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) reshard(c *shard.Cache, merchant string, n int) {
	e.t.Helper()
	if _, err := e.d.Reshard(context.Background(), merchant, n); err != nil {
		e.t.Fatalf("reshard %s to %d: %v", merchant, n, err)
	}
	if err := c.Refresh(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// shardState sums a merchant's shards of layout n: remain, pending amounts
// not in the ledger, and how many shards exist.
func (e *env) shardState(merchant string, n int) (remain, inFlight int64, present int) {
	e.t.Helper()
	for _, t := range shard.Tags(merchant, n) {
		q := e.hash(t)
		if !q.Exists {
			continue
		}
		present++
		remain += q.Remain
		ids := make([]string, len(q.Pending))
		for k, p := range q.Pending {
			ids[k] = p.EventID
		}
		existing, err := e.store.ExistingEvents(context.Background(), ids)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, p := range q.Pending {
			if _, in := existing[p.EventID]; !in {
				inFlight += p.Amount
			}
		}
	}
	return remain, inFlight, present
}

// payments are n events of 1 unit of a merchant.
func payments(prefix, merchant string, n int) []event.PaymentSucceeded {
	evs := make([]event.PaymentSucceeded, n)
	for i := range evs {
		evs[i] = pay(fmt.Sprintf("%s-%05d", prefix, i), merchant, 1)
	}
	return evs
}

// hammer applies events from workers goroutines, each with its own Deductor
// (as separate worker processes), in batches of batch events taken in turn,
// while during runs between batches.
func (e *env) hammer(c *shard.Cache, events []event.PaymentSucceeded, workers, batch int, during func()) {
	e.t.Helper()
	var next int
	var mu sync.Mutex
	take := func() []event.PaymentSucceeded {
		mu.Lock()
		defer mu.Unlock()
		end := min(next+batch, len(events))
		b := events[next:end]
		next = end
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		d := e.shardedDeductor(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := take(); len(b) > 0; b = take() {
				res, err := d.Apply(context.Background(), b)
				if err != nil {
					errs <- err
					return
				}
				for k, r := range res {
					if r.Outcome != Applied && r.Outcome != Insufficient {
						errs <- fmt.Errorf("event %s: %s %v", b[k].EventID, r.Outcome, r.Err)
						return
					}
				}
			}
		}()
	}
	if during != nil {
		during()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// checkSharded asserts a quiet sharded merchant's invariants: the ledger's
// debits are exactly min(granted, payments) of 1 unit, every rejection was
// written when MySQL's balance at its row was below its amount, the balance
// row matches the ledger, and the shards of layout n hold exactly what MySQL
// has left, with nothing in flight and no shard of another layout left.
func (e *env) checkSharded(merchant string, granted int64, payments, n int, otherLayouts ...int) {
	e.t.Helper()
	var rows []ledger.Row
	if err := e.mysql.DB.Where("merchant_id = ? AND kind <> ?", merchant, ledger.KindCredit).Find(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	var debited, rejected int64
	for _, r := range rows {
		switch r.Kind {
		case ledger.KindDebit:
			debited += r.Amount
		case ledger.KindRejected:
			rejected++
			if r.BalanceAfter == nil || *r.BalanceAfter >= r.Amount {
				e.t.Errorf("event %s rejected while MySQL's balance was %v (amount %d): undersold", r.EventID, value(r.BalanceAfter), r.Amount)
			}
		}
	}
	want := min(granted, int64(payments))
	if debited != want || int64(len(rows)) != int64(payments) || rejected != int64(payments)-want {
		e.t.Errorf("%d rows: %d debited, %d rejected; want %d rows, %d debited", len(rows), debited, rejected, payments, want)
	}
	b := e.balance(merchant)
	if b.Debited != want || b.Available() < 0 {
		e.t.Errorf("balance row credited=%d debited=%d, want debited %d, never below zero", b.Credited, b.Debited, want)
	}
	remain, inFlight, present := e.shardState(merchant, n)
	if present > 0 && (remain != b.Available() || inFlight != 0) {
		e.t.Errorf("%d shard(s) of %d hold %d, %d in flight; MySQL has %d left", present, n, remain, inFlight, b.Available())
	}
	for _, o := range otherLayouts {
		for _, t := range (shard.Layout{Shards: n, FoldingFrom: o}).Tags(merchant)[n:] {
			if x, _ := e.redis.Client.Exists(context.Background(), e.redis.Keys.Quota(t)).Result(); x != 0 {
				e.t.Errorf("shard %s of the folded layout of %d is still in Redis", t, o)
			}
		}
	}
	e.checkConsistent()
}

// A sharded merchant with total quota Q gets 1-unit payments from several
// writers at once (separate Deductors, as separate workers), in mixed batches:
// exactly Q are applied, every rejection is one MySQL's balance could not
// cover (undersell: however unevenly the shards ran dry), and MySQL never
// goes below zero (oversell: even with every shard's remain raised by hand,
// MySQL's guard refuses the excess and the shards are rebuilt from MySQL).
func TestShardedQuota(t *testing.T) {
	for _, tc := range []struct {
		name             string
		q                int64
		shards, payments int
		writers, batch   int
		raised           int64 // remain set by hand on every shard first; 0: none
	}{
		{"undersell", 300, 8, 500, 4, 7, 0},
		{"oversell", 50, 4, 200, 3, 9, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.shards()
			e.grant("m-hot", tc.q)
			e.reshard(c, "m-hot", tc.shards)
			for _, tag := range shard.Tags("m-hot", tc.shards) {
				if tc.raised == 0 {
					break
				}
				if err := e.redis.Client.HSet(context.Background(), e.redis.Keys.Quota(tag), quota.FieldRemain, tc.raised).Err(); err != nil {
					t.Fatal(err)
				}
			}
			evs := payments(tc.name, "m-hot", tc.payments)
			e.hammer(c, evs, tc.writers, tc.batch, nil)
			e.checkSharded("m-hot", tc.q, len(evs), tc.shards)
		})
	}
}

// Resharding 1 -> 8 -> 3 while 4 workers apply payments: nothing is lost or
// applied twice, no rejection while MySQL could cover, the old shards are
// folded away, and the last layout holds exactly what MySQL has left.
func TestReshardUnderLoad(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	const q = 1500
	e.grant("m-hot", q)
	evs := payments("r", "m-hot", 2000)
	e.hammer(c, evs, 4, 11, func() {
		e.reshard(c, "m-hot", 8)
		e.reshard(c, "m-hot", 3)
	})
	e.checkSharded("m-hot", q, len(evs), 3, 1, 8)
	if x, _ := e.redis.Client.Exists(context.Background(), e.redis.Keys.Quota("m-hot")).Result(); x != 0 {
		t.Error("quota:{m-hot} of the one-shard layout is still in Redis")
	}
}

// A deduction left pending by a crash moves with a resharding to its event's
// new shard, where the redelivered event finds and reuses it: one debit, and
// the shards sum to MySQL's balance.
func TestReshardCarriesPending(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	e.grant("m-1", 100)
	ev := pay("crash-1", "m-1", 7)
	dying := e.shardedDeductor(c)
	dying.afterStep = func(s string) error {
		if s == stepDeducted {
			return errors.New("killed")
		}
		return nil
	}
	if _, err := dying.Apply(context.Background(), []event.PaymentSucceeded{ev}); err == nil {
		t.Fatal("no crash")
	}
	// The dead holder's lock expires (TTL), without its help.
	if err := e.redis.Client.Del(context.Background(), e.redis.Keys.Lock("m-1")).Err(); err != nil {
		t.Fatal(err)
	}
	e.reshard(c, "m-1", 8)
	remain, inFlight, _ := e.shardState("m-1", 8)
	if remain != 93 || inFlight != 7 {
		t.Fatalf("after the fold: remain %d, in flight %d; want 93 and the crash's 7", remain, inFlight)
	}
	res := e.apply(e.shardedDeductor(c), []event.PaymentSucceeded{ev, pay("after-1", "m-1", 90)})
	if res[0].Outcome != Applied || res[1].Outcome != Applied || res[1].BalanceAfter != 3 {
		t.Fatalf("results %+v", res)
	}
	if remain, inFlight, _ := e.shardState("m-1", 8); remain != 3 || inFlight != 0 {
		t.Errorf("shards hold %d, %d in flight; want 3 and none", remain, inFlight)
	}
	e.checkConsistent()
}

// A sharded merchant's events spread over its shards by event id, and a
// deduction left pending by a crash lives in its event's shard, also after a
// resharding moved it, so that the redelivered event finds it there: no second
// deduction, nothing left pending, and the shards sum to MySQL's balance with
// no wide pass after the redelivery to set them right.
func TestRedeliveryFindsItsPendingInItsShard(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	e.grant("m-hot", 400)
	e.reshard(c, "m-hot", 4) // 100 a shard
	crashed := make([]event.PaymentSucceeded, 8)
	for i := range crashed {
		crashed[i] = pay(fmt.Sprintf("crash-%d", i), "m-hot", 5)
	}
	dying := e.shardedDeductor(c)
	dying.afterStep = func(s string) error {
		if s == stepDeducted {
			return errors.New("killed")
		}
		return nil
	}
	if _, err := dying.Apply(context.Background(), crashed); err == nil {
		t.Fatal("no crash")
	}
	// The dead holder's locks expire (TTL), without its help.
	for _, tag := range shard.Tags("m-hot", 4) {
		if err := e.redis.Client.Del(context.Background(), e.redis.Keys.Lock(tag)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	inOwnShards := func(when string, n int) {
		t.Helper()
		at := e.pendingShards("m-hot", n)
		for _, ev := range crashed {
			if s, found := at[ev.EventID]; !found || s != shard.Of(ev.EventID, n) {
				t.Errorf("%s: pending deductions by shard of %d: %v; want each in its event's shard (%s in %d)", when, n, at, ev.EventID, shard.Of(ev.EventID, n))
				return
			}
		}
	}
	inOwnShards("after the crash", 4)
	e.reshard(c, "m-hot", 8) // 45 a shard, the crash's 40 in flight
	inOwnShards("after resharding", 8)

	res := e.apply(e.shardedDeductor(c), crashed)
	for k, r := range res {
		if r.Outcome != Applied {
			t.Fatalf("redelivered %s: %+v", crashed[k].EventID, r)
		}
	}
	b := e.balance("m-hot")
	if remain, _, present := e.shardState("m-hot", 8); b.Debited != 40 || remain != b.Available() || present != 8 {
		t.Errorf("MySQL debited %d (want 40), %d left, but the %d shard(s) hold %d: the redelivery deducted again", b.Debited, b.Available(), present, remain)
	}
	if left := e.pendingShards("m-hot", 8); len(left) != 0 {
		t.Errorf("pending deductions left after the redelivery (by shard): %v", left)
	}
}

// pendingShards is the shard of each pending deduction of a merchant's layout
// of n shards, in the ledger or not, by event id.
func (e *env) pendingShards(merchant string, n int) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for s, tag := range shard.Tags(merchant, n) {
		for _, p := range e.hash(tag).Pending {
			out[p.EventID] = s
		}
	}
	return out
}

// A merchant already below its overdraft floor (a policy tightened after it
// went into debt) spread over shards: the shards carry the debt, summing to
// MySQL's balance, not to zero; a payment is rejected and leaves it so.
func TestShardsCarryADebtBelowTheFloor(t *testing.T) {
	e := newEnv(t)
	c := e.shards()
	ctx := context.Background()
	e.grant("m-debt", 100)
	if err := e.d.SetPolicy(ctx, "m-debt", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 200}); err != nil {
		t.Fatal(err)
	}
	if res := e.apply(e.d, []event.PaymentSucceeded{pay("into-debt", "m-debt", 180)}); res[0].Outcome != Applied {
		t.Fatalf("a payment within the floor: %+v", res[0])
	}
	if err := e.d.SetPolicy(ctx, "m-debt", ledger.Policy{Kind: ledger.PolicyReject}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		remain, inFlight, present := e.shardState("m-debt", 4)
		if b := e.balance("m-debt"); b.Available() != -80 || remain != -80 || inFlight != 0 || present != 4 {
			t.Errorf("%s: %d shard(s) hold %d (%d in flight); MySQL has %d, want all -80", when, present, remain, inFlight, b.Available())
		}
	}
	e.reshard(c, "m-debt", 4)
	check("spread over 4 shards")
	if res := e.apply(e.shardedDeductor(c), []event.PaymentSucceeded{pay("in-debt", "m-debt", 1)}); res[0].Outcome != Insufficient {
		t.Fatalf("a payment below the floor: %+v", res[0])
	}
	check("after a rejection")
}

func TestDecide(t *testing.T) {
	pending := inflight{"p5": {EventID: "p5", Amount: 5}}
	for _, tc := range []struct {
		name  string
		wants []want
		free  int64
		codes string
		left  int64
	}{
		{"all fit", []want{{"a", 2}, {"b", 3}}, 5, "DD", 0},
		{"in order, a smaller one after a miss", []want{{"a", 4}, {"b", 3}, {"c", 1}}, 5, "DID", 0},
		{"pending reused, not charged again", []want{{"p5", 5}, {"a", 1}}, 1, "PD", 0},
		{"pending with another amount", []want{{"p5", 4}}, 10, "C", 10},
		{"nothing free", []want{{"a", 1}}, 0, "I", 0},
		{"negative free reads as none", []want{{"a", 1}}, -3, "I", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			codes, left := decide(tc.wants, pending, tc.free)
			if string(codes) != tc.codes || left != tc.left {
				t.Errorf("decide = %q, %d; want %q, %d", codes, left, tc.codes, tc.left)
			}
		})
	}
}
