package deduct

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/plan"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/shard"
)

var (
	modelSeed   = flag.Uint64("deduct.model.seed", 0, "replay TestWritePathModel with this seed (0: the seeds 1..runs)")
	modelRuns   = flag.Int("deduct.model.runs", 32, "how many seeds TestWritePathModel runs")
	modelRandom = flag.Bool("deduct.model.random", false, "draw TestWritePathModel's seeds at random instead of 1..runs")
)

// TestWritePathModel draws, per seed, every feature's settings for a few
// merchants (shards 1-8 and reshards, thresholds in units and percent with
// equal ones, each overdraft policy, grants with priorities, expiries and
// rollovers by command and by the operator's path, a recurring plan) and a
// run of batches on two holders whose clocks differ (ids), killed or paused
// past their locks after any step, redelivered, beside grants, reshards,
// expiries and lying caches. Everything runs in one goroutine, so a seed
// replays exactly (-deduct.model.seed=N). Then every message is delivered
// once more and the outcome is held to the reference model of the ledger
// (ledger.Replay: rows in, balances, balance_after and events out): every
// outcome, ledger row, balance row and outbox event; the invariant checker
// holds grants and Redis hashes to MySQL; the reconciler finds nothing to
// say but of the caches lied about, and reports an unreadable shard as
// malformed without repairing it.
func TestWritePathModel(t *testing.T) {
	seeds := make([]uint64, *modelRuns)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
		if *modelRandom {
			seeds[i] = rand.Uint64()
		}
	}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("replay with -run 'TestWritePathModel' -deduct.model.seed=%d", seed)
			newModelRun(t, seed).run()
		})
	}
}

// modelMerchant is one merchant's drawn settings.
type modelMerchant struct {
	id     string
	policy ledger.Policy
	alerts *quotaevent.Alerts // nil: the default
	shards int
}

type modelRun struct {
	*env
	rng       *rand.Rand
	def       quotaevent.Alerts
	merchants []modelMerchant
	holders   [2]*Deductor
	caches    [2]*shard.Cache
	pool      []event.PaymentSucceeded
	grants    []event.GrantCommand  // every grant command sent, for redeliveries
	refunds   []event.RefundCommand // every refund sent first under its id, for redeliveries
	lies      bool                  // this run makes caches lie by hand
	corrupted map[string]bool
}

func newModelRun(t *testing.T, seed uint64) *modelRun {
	r := &modelRun{env: newEnv(t), rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), corrupted: map[string]bool{}}
	r.lies = r.rng.IntN(3) == 0
	r.def = r.drawAlerts(1000)
	// Two holders whose clocks differ: the first one's ids sort after the
	// second's, whichever commits first.
	for h := range r.holders {
		s, err := ledgerdb.New(r.mysql.SQL, skewedIDs{r.ids, int64(1-h) << 40}, nil, ledgerdb.Options{Events: ledgerdb.Events{DefaultAlerts: r.def}})
		if err != nil {
			t.Fatal(err)
		}
		r.caches[h] = r.shards()
		if r.holders[h], err = New(r.redis.Client, r.redis.Keys, r.locker, s, nil, nil, Options{Shards: r.caches[h]}); err != nil {
			t.Fatal(err)
		}
	}
	r.store, r.d = r.holders[0].ledger.(*ledgerdb.Store), r.holders[0] // the env's helpers read through the first
	t.Logf("default thresholds %s, lies %v", r.def, r.lies)
	for i := range 4 {
		r.merchants = append(r.merchants, r.drawMerchant(fmt.Sprintf("m-%d", i), i < 3))
	}
	for k := range 40 {
		ev := pay(fmt.Sprintf("e%d", k), r.pickMerchant(), r.rng.Int64N(12)+1)
		r.pool = append(r.pool, ev)
		if r.rng.IntN(10) == 0 { // the same event_id for another merchant
			twin := ev
			for twin.MerchantID == ev.MerchantID {
				twin.MerchantID = r.pickMerchant()
			}
			r.pool = append(r.pool, twin)
		}
	}
	return r
}

// drawAlerts draws thresholds for balances about grant: none, units,
// percent, both, or both equal (units = percent of grant).
func (r *modelRun) drawAlerts(grant int64) quotaevent.Alerts {
	p := 5 * (1 + r.rng.IntN(8))
	switch r.rng.IntN(5) {
	case 0:
		return quotaevent.Alerts{}
	case 1:
		return quotaevent.Alerts{Units: 1 + r.rng.Int64N(grant/2)}
	case 2:
		return quotaevent.Alerts{Percent: p}
	case 3:
		return quotaevent.Alerts{Units: 1 + r.rng.Int64N(grant/2), Percent: p}
	}
	return quotaevent.Alerts{Units: grant * int64(p) / 100, Percent: p}
}

// drawMerchant draws a merchant's settings and, when known, grants it its
// first quota and applies them.
func (r *modelRun) drawMerchant(id string, known bool) modelMerchant {
	m := modelMerchant{id: id, shards: 1}
	if !known {
		return m // unknown until a grant reaches it: default settings
	}
	first := 10 + r.rng.Int64N(50)
	switch r.rng.IntN(3) {
	case 1:
		m.policy = ledger.Policy{Kind: ledger.PolicyFloor, Floor: 1 + r.rng.Int64N(30)}
	case 2:
		m.policy = ledger.Policy{Kind: ledger.PolicyOverage}
	default:
		m.policy = ledger.Policy{Kind: ledger.PolicyReject}
	}
	if r.rng.IntN(2) == 0 {
		a := r.drawAlerts(first)
		m.alerts = &a
	}
	m.shards = 1 + r.rng.IntN(8)
	r.t.Logf("merchant %s: policy %s, thresholds %v, %d shard(s), first grant %d", id, m.policy, m.alerts, m.shards, first)
	r.grant(event.GrantCommand{GrantID: "g-first-" + id, MerchantID: id, Amount: first})
	ctx, d := context.Background(), r.holders[0]
	if err := d.SetPolicy(ctx, id, m.policy); err != nil {
		r.t.Fatal(err)
	}
	if m.alerts != nil {
		if err := d.ledger.(*ledgerdb.Store).SetAlerts(ctx, id, m.alerts); err != nil {
			r.t.Fatal(err)
		}
	}
	r.reshard(id, m.shards)
	return m
}

func (r *modelRun) pickMerchant() string { return fmt.Sprintf("m-%d", r.rng.IntN(4)) }

func (r *modelRun) holder() (int, *Deductor) {
	h := r.rng.IntN(2)
	return h, r.holders[h]
}

func (r *modelRun) run() {
	if r.rng.IntN(2) == 0 {
		r.addPlan()
	}
	for range 30 {
		switch r.rng.IntN(10) {
		case 0, 1:
			r.randomGrant()
		case 2:
			r.reshard(r.pickMerchant(), 1+r.rng.IntN(8))
		case 3:
			r.expire()
		case 4:
			if r.lies {
				r.corrupt()
			}
		default:
			r.interruptedBatch()
		}
		if r.rng.IntN(3) == 0 {
			r.randomRefund()
		}
	}
	// Everything is delivered once more, and every grant command: a
	// redelivery may still meet a stale cache, never an error.
	results := r.apply(r.holders[0], r.pool)
	r.redeliverRefunds()
	r.expire()
	r.check(results)
	r.reconcile()
}

// interruptedBatch is the property test's: a batch on one holder that may be
// killed, or paused past its locks while the other works, after any step.
func (r *modelRun) interruptedBatch() {
	_, h := r.holder()
	other := r.holders[0]
	if h == other {
		other = r.holders[1]
	}
	batch := r.batch()
	steps := []string{stepLocked, stepDeducted, stepCommitted, stepConfirmed}
	at, mode := steps[r.rng.IntN(len(steps))], r.rng.IntN(3) // 0 kill, 1 pause, 2 neither
	r.t.Logf("batch %s on holder %p, %s after %s", brief(batch), h, [...]string{"killed", "paused", "not stopped"}[mode], at)
	h.afterStep = func(s string) error {
		if s != at {
			return nil
		}
		if mode == 0 {
			r.expireLocks()
			return errKilled
		}
		if mode == 1 {
			r.expireLocks()
			b := r.batch()
			res, err := other.Apply(context.Background(), b)
			r.t.Logf("  meanwhile %s: %v %v", brief(b), outcomes(res), err)
			r.allowed(err)
			if r.rng.IntN(3) == 0 {
				r.randomGrant()
			}
		}
		return nil
	}
	defer func() { h.afterStep = nil }()
	res, err := h.Apply(context.Background(), batch)
	r.t.Logf("  -> %v %v", outcomes(res), err)
	if mode == 0 && errors.Is(err, errKilled) {
		return
	}
	r.allowed(err)
}

func (r *modelRun) allowed(err error) {
	r.t.Helper()
	if err != nil && !errors.Is(err, ErrLockLost) {
		r.t.Fatalf("Apply: %v", err)
	}
}

func (r *modelRun) batch() []event.PaymentSucceeded {
	out := make([]event.PaymentSucceeded, r.rng.IntN(6)+1)
	for i := range out {
		out[i] = r.pool[r.rng.IntN(len(r.pool))]
	}
	return out
}

// expireLocks deletes every lock, as their TTL would for a dead or paused holder.
func (r *modelRun) expireLocks() {
	ctx := context.Background()
	iter := r.redis.Client.Scan(ctx, 0, r.redis.Keys.Prefix()+"lock:*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := r.redis.Client.Del(ctx, iter.Val()).Err(); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := iter.Err(); err != nil {
		r.t.Fatal(err)
	}
}

// randomGrant sends a new grant (by command, with terms, or by the
// operator's plain path), or a grant sent before again (a duplicate), or one
// of its ids with another amount (a conflict).
func (r *modelRun) randomGrant() {
	if len(r.grants) > 0 && r.rng.IntN(5) == 0 {
		g := r.grants[r.rng.IntN(len(r.grants))]
		if r.rng.IntN(2) == 0 {
			g.Amount++
		}
		r.grant(g)
		return
	}
	id := fmt.Sprintf("g%d", len(r.grants))
	m := r.pickMerchant()
	amount := 1 + r.rng.Int64N(40)
	if r.rng.IntN(3) == 0 {
		r.t.Logf("grant %s: %d to %s (operator)", id, amount, m)
		if _, err := r.holders[r.rng.IntN(2)].Grant(context.Background(), m, amount, id); err != nil {
			r.t.Fatalf("grant %s: %v", id, err)
		}
		r.grants = append(r.grants, event.GrantCommand{GrantID: id, MerchantID: m, Amount: amount})
		return
	}
	g := event.GrantCommand{GrantID: id, MerchantID: m, Amount: amount}
	if r.rng.IntN(2) == 0 {
		p := []int{10, 50, 90}[r.rng.IntN(3)]
		g.Priority = &p
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	switch r.rng.IntN(3) {
	case 1: // expires long after the run: only its place in the burn-down shows
		exp := now.Add(time.Hour)
		g.ExpiresAt = &exp
	case 2: // issued late for a period that has ended: expires at once
		exp, start := now.Add(-time.Minute), now.Add(-time.Hour)
		g.ExpiresAt, g.StartsAt = &exp, &start
	}
	if g.ExpiresAt != nil && r.rng.IntN(2) == 0 {
		g.RolloverMax = 1 + r.rng.Int64N(20)
	}
	r.grant(g)
}

// randomRefund sends a refund of a payment of the pool (recorded or not yet,
// debited or rejected, of its merchant or its twin's), partial, whole or
// more than its amount, or a refund sent before again (a duplicate), or one
// of its ids with another amount (a conflict), through a holder's RefundBatch.
func (r *modelRun) randomRefund() {
	var c event.RefundCommand
	if len(r.refunds) > 0 && r.rng.IntN(4) == 0 {
		c = r.refunds[r.rng.IntN(len(r.refunds))]
		if r.rng.IntN(2) == 0 {
			c.Amount++
		}
	} else {
		ev := r.pool[r.rng.IntN(len(r.pool))]
		reason := []string{event.RefundReasonRefund, event.RefundReasonChargeback, event.RefundReasonCorrection}[r.rng.IntN(3)]
		c = event.RefundCommand{RefundID: fmt.Sprintf("rf%d", len(r.refunds)), EventID: ev.EventID, MerchantID: ev.MerchantID,
			Amount: 1 + r.rng.Int64N(ev.Amount+2), Reason: reason, OccurredAt: time.Now().UTC()}
		r.refunds = append(r.refunds, c)
	}
	res, err := r.holders[r.rng.IntN(2)].RefundBatch(context.Background(), []event.RefundCommand{c})
	r.t.Logf("refund %s: %d of %s/%s: %v %v", c.RefundID, c.Amount, c.EventID, c.MerchantID, outcomes(res), err)
	if err != nil {
		r.t.Fatalf("refund %s: %v", c.RefundID, err)
	}
	if o := res[0].Outcome; o != Applied && o != Waiting && o != Void && o != Duplicate && o != Conflict {
		r.t.Fatalf("refund %s: %+v", c.RefundID, res[0])
	}
}

// redeliverRefunds sends every refund once more: each is recorded, so each
// is a duplicate, or the conflict it was the first time (another merchant's
// payment, no payment, or beyond what the debit left).
func (r *modelRun) redeliverRefunds() {
	if len(r.refunds) == 0 {
		return
	}
	res, err := r.holders[1].RefundBatch(context.Background(), r.refunds)
	if err != nil {
		r.t.Fatalf("refunds again: %v", err)
	}
	for i, o := range res {
		if o.Outcome != Duplicate && o.Outcome != Conflict {
			r.t.Errorf("refund %s delivered again: %s %v", r.refunds[i].RefundID, o.Outcome, o.Err)
		}
	}
}

// grant sends one grant command through a holder's GrantBatch.
func (r *modelRun) grant(g event.GrantCommand) {
	r.t.Helper()
	res, err := r.holders[r.rng.IntN(2)].GrantBatch(context.Background(), []event.GrantCommand{g})
	r.t.Logf("grant %s: %d to %s (prio %v, expires %v, rollover %d): %v %v", g.GrantID, g.Amount, g.MerchantID, g.Priority, g.ExpiresAt, g.RolloverMax, outcomes(res), err)
	if err != nil {
		r.t.Fatalf("grant %s: %v", g.GrantID, err)
	}
	if o := res[0].Outcome; o != Applied && o != Duplicate && o != Conflict {
		r.t.Fatalf("grant %s: %+v", g.GrantID, res[0])
	}
	if !slices.ContainsFunc(r.grants, func(s event.GrantCommand) bool { return s.GrantID == g.GrantID }) {
		r.grants = append(r.grants, g)
	}
}

// addPlan gives a merchant a recurring plan whose current period started half
// an hour ago, and issues it.
func (r *modelRun) addPlan() {
	ctx := context.Background()
	db, err := r.mysql.DB.DB()
	if err != nil {
		r.t.Fatal(err)
	}
	m := r.merchants[r.rng.IntN(3)].id
	anchor := time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)
	p := plan.Plan{MerchantID: m, Amount: 10 + r.rng.Int64N(30), Every: plan.Every{Duration: time.Hour},
		RolloverMax: r.rng.Int64N(10), Priority: 10, Anchor: anchor, NextStart: anchor}
	r.t.Logf("plan of %s: %d an hour, rollover %d", m, p.Amount, p.RolloverMax)
	store := plan.NewStore(db)
	if err := store.Set(ctx, p); err != nil {
		r.t.Fatal(err)
	}
	issue := func(ctx context.Context, g event.GrantCommand) error {
		res, err := r.holders[0].GrantBatch(ctx, []event.GrantCommand{g})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	if n, err := plan.NewScheduler(store, issue).RunOnce(ctx); err != nil || n != 1 {
		r.t.Fatalf("plan: %d issued, %v", n, err)
	}
}

// reshard sets a merchant's shard count through a holder; that holder's
// routing follows at once, the other's when it happens to refresh.
func (r *modelRun) reshard(m string, n int) {
	h, d := r.holder()
	r.t.Logf("reshard %s to %d on holder %d", m, n, h)
	if _, err := d.Reshard(context.Background(), m, n); err != nil {
		r.t.Fatalf("reshard %s: %v", m, err)
	}
	for k, c := range r.caches {
		if k == h || r.rng.IntN(2) == 0 {
			if err := c.Refresh(context.Background()); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

func (r *modelRun) expire() {
	if _, err := r.holders[r.rng.IntN(2)].ExpireDue(context.Background(), 100); err != nil {
		r.t.Fatalf("expire: %v", err)
	}
}

// layout is a merchant's shard tags as MySQL has them.
func (r *modelRun) layout(m string) []string {
	l, err := r.holders[0].shards.Layouts(context.Background(), []string{m})
	if err != nil {
		r.t.Fatal(err)
	}
	return l[m].Tags(m)
}

// corrupt makes one shard of a merchant lie: lower, higher, or gone.
func (r *modelRun) corrupt() {
	m := r.pickMerchant()
	tags := r.layout(m)
	key := r.redis.Keys.Quota(tags[r.rng.IntN(len(tags))])
	ctx := context.Background()
	r.corrupted[m] = true
	var err error
	switch how := max(r.rng.IntN(4)-1, 0); how { // zeroed twice as often: the lie that must not reject
	case 0:
		r.t.Logf("%s zeroed by hand", key)
		err = r.redis.Client.HSet(ctx, key, quota.FieldRemain, 0).Err()
	case 1:
		r.t.Logf("%s raised by hand", key)
		err = r.redis.Client.HIncrBy(ctx, key, quota.FieldRemain, r.rng.Int64N(50)+1).Err()
	default:
		r.t.Logf("%s deleted by hand", key)
		err = r.redis.Client.Del(ctx, key).Err()
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// check holds the end state to the model.
func (r *modelRun) check(final []Result) {
	t, ctx := r.t, context.Background()
	var rows []ledger.Row
	if err := r.mysql.DB.WithContext(ctx).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	byEvent := map[string]ledger.Row{}
	for _, row := range rows {
		byEvent[row.EventID] = row
	}
	// Outcomes: every message ends as its event's row says.
	var recorded []event.PaymentSucceeded // the message each payment row records
	seen := map[string]bool{}
	for i, ev := range r.pool {
		row, found := byEvent[ev.EventID]
		matches := found && row.MerchantID == ev.MerchantID && row.Amount == ev.Amount
		if matches && !seen[ev.EventID] {
			seen[ev.EventID] = true
			recorded = append(recorded, ev)
		}
		o := final[i].Outcome
		switch want := outcomeOf(row); {
		case !found:
			t.Errorf("event %s: no ledger row (lost)", ev.EventID)
		case matches && o != Duplicate && o != want:
			t.Errorf("message %s/%s/%d: final outcome %s, its row is %s %s: want %s or duplicate", ev.EventID, ev.MerchantID, ev.Amount, o, row.Kind, row.Reason, want)
		case !matches && o != Conflict:
			t.Errorf("message %s/%s/%d: final outcome %s; the row records %s/%d: want conflict", ev.EventID, ev.MerchantID, ev.Amount, o, row.MerchantID, row.Amount)
		}
	}
	// The reference model: the ledger replayed in seq order.
	settings := r.balances()
	replay := ledger.Replay(rows, settings, r.def)
	outbox := map[string][]string{}
	var events []struct{ MerchantID, ID string }
	if err := r.mysql.DB.Raw("SELECT merchant_id, id FROM quota_outbox ORDER BY seq").Scan(&events).Error; err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		outbox[e.MerchantID] = append(outbox[e.MerchantID], e.ID)
	}
	for _, m := range r.merchants {
		want := replay[m.id]
		if want == nil {
			want = &ledger.Replayed{}
		}
		for _, f := range want.Faults {
			t.Errorf("%s: %s", m.id, f)
		}
		b := settings[m.id]
		if b.Credited != want.Credited || b.Debited != want.Debited || b.Seq != want.Seq {
			t.Errorf("%s: balance row %d/%d seq %d, its ledger replays to %d/%d seq %d", m.id, b.Credited, b.Debited, b.Seq, want.Credited, want.Debited, want.Seq)
		}
		if got, w := outbox[m.id], eventIDs(want.Events); !slices.Equal(got, w) {
			t.Errorf("%s: outbox\n  %v\nits ledger replays to\n  %v", m.id, got, w)
		}
	}
	for _, row := range rows {
		if want := replay[row.MerchantID]; row.Seq != nil && want != nil && (*row.Seq > int64(len(want.After)) || value(row.BalanceAfter) != want.After[*row.Seq-1]) {
			t.Errorf("row %s (seq %d) at balance %v; its ledger replays to %v", row.EventID, *row.Seq, value(row.BalanceAfter), want.After)
		}
	}
	// Grants, overdraft and Redis, by the invariant checker.
	var drifted []string
	for m := range r.corrupted {
		drifted = append(drifted, m)
	}
	rep, err := invariant.Check(ctx, invariant.Produced{Valid: recorded}, invariant.State{DB: r.mysql.DB, Redis: r.redis.Client,
		Keys: r.redis.Keys, RedisSettled: true, Drifted: drifted})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("invariants:\n%s", rep)
		for _, m := range r.merchants {
			for _, tag := range r.layout(m.id) {
				h, _ := r.redis.Client.HGetAll(ctx, r.redis.Keys.Quota(tag)).Result()
				t.Logf("  %s: %v", tag, h)
			}
		}
	}
	for _, m := range r.merchants {
		r.checkGrantsBackBalance(m.id)
	}
}

// outcomeOf is the outcome that recorded row.
func outcomeOf(row ledger.Row) Outcome {
	switch {
	case row.Kind == ledger.KindDebit:
		return Applied
	case row.Reason == ledger.ReasonUnknownMerchant:
		return UnknownMerchant
	}
	return Insufficient
}

// reconcile runs the reconciler: it reports nothing but of the caches lied
// about (which it repairs); then one shard is made unreadable, and the
// reconciler reports it as malformed and leaves it for a person, whatever the
// merchant's shard count.
func (r *modelRun) reconcile() {
	t, ctx := r.t, context.Background()
	db, err := r.mysql.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	locks, err := lock.New(r.redis.Client, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	rc, err := reconcile.New(db, r.redis.Client, r.redis.Keys, reconcile.NewLocker(locks), reconcile.Config{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rep := rc.Run(ctx)
	for _, f := range rep.Findings {
		if f.Kind == reconcile.KindMissingKey || (r.corrupted[f.MerchantID] && (f.Kind == reconcile.KindRedisHigh || f.Kind == reconcile.KindRedisLow)) {
			continue
		}
		t.Errorf("reconciler: %s %s %s: %s", f.MerchantID, f.Kind, f.Action, f.Detail)
	}
	if rep.Error != "" {
		t.Fatalf("reconciler: %s", rep.Error)
	}
	m := r.merchants[r.rng.IntN(3)].id
	tags := r.layout(m)
	key := r.redis.Keys.Quota(tags[r.rng.IntN(len(tags))])
	if err := r.redis.Client.HSet(ctx, key, quota.FieldRemain, "fifty").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s made unreadable (%d shard(s))", key, len(tags))
	rep = rc.Run(ctx)
	var kinds []string
	for _, f := range rep.Findings {
		if f.MerchantID == m {
			kinds = append(kinds, string(f.Kind)+"/"+string(f.Action))
		}
	}
	if want := "malformed/reported"; strings.Join(kinds, " ") != want {
		t.Errorf("reconciler on %s with %s unreadable: %v, want %s", m, key, kinds, want)
	}
	if v, err := r.redis.Client.HGet(ctx, key, quota.FieldRemain).Result(); err != nil || v != "fifty" {
		t.Errorf("the unreadable %s was rewritten: remain %q, %v", key, v, err)
	}
}

func brief(batch []event.PaymentSucceeded) string {
	var b []byte
	for _, ev := range batch {
		b = fmt.Appendf(b, "%s/%s/%d ", ev.EventID, ev.MerchantID, ev.Amount)
	}
	return string(b)
}
