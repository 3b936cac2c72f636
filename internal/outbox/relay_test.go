package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/schemas"
)

var seedFlag = flag.Uint64("outbox.seed", 0, "seed of TestPublishedCrossingsAreTheLedgers (0: random)")

type counterIDs struct{ n atomic.Int64 }

func (c *counterIDs) NextIDs(dst []int64) error {
	end := c.n.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

// rig is a ledger and a relay on one test's database and topic.
type rig struct {
	t      *testing.T
	db     *gorm.DB
	dbName string
	store  *ledgerdb.Store
	kafka  *testenv.Kafka
	topic  string
	writer *kafka.Writer
	m      *Metrics
}

const partitions = 3

func newRig(t *testing.T, events ledgerdb.Events) *rig {
	t.Helper()
	my := testenv.NewMySQL(t)
	k := testenv.NewKafka(t)
	g := &rig{t: t, db: my.DB, dbName: my.Name, kafka: k, topic: k.Topic(t, partitions)}
	var err error
	if g.store, err = ledgerdb.New(my.SQL, &counterIDs{}, nil, ledgerdb.Options{Events: events}); err != nil {
		t.Fatal(err)
	}
	tr := &kafka.Transport{}
	g.writer = &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: g.topic, Transport: tr, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, MaxAttempts: 1, BatchTimeout: time.Millisecond}
	t.Cleanup(func() {
		_ = g.writer.Close()
		tr.CloseIdleConnections()
		_ = g.store.Close()
	})
	if g.m, err = NewMetrics(nil); err != nil {
		t.Fatal(err)
	}
	return g
}

// run starts a relay publishing through w; stop ends it and waits.
func (g *rig) run(w Writer, cfg Config) (stop func()) {
	g.t.Helper()
	return g.runWith(w, cfg, g.m)
}

func (g *rig) runWith(w Writer, cfg Config, m *Metrics) (stop func()) {
	g.t.Helper()
	sqlDB, err := g.db.DB()
	if err != nil {
		g.t.Fatal(err)
	}
	cfg.Poll, cfg.Standby = 10*time.Millisecond, 100*time.Millisecond
	cfg.PruneEvery = 20 * time.Millisecond
	r, err := New(sqlDB, w, zap.NewNop(), m, cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			g.t.Errorf("Run: %v", err)
		}
	}
}

// unsentRows counts the outbox rows not yet published, and all rows.
func (g *rig) outboxRows() (unsent, all int64) {
	g.t.Helper()
	if err := g.db.Raw("SELECT COUNT(*) FROM quota_outbox WHERE sent_at IS NULL").Scan(&unsent).Error; err != nil {
		g.t.Fatal(err)
	}
	if err := g.db.Raw("SELECT COUNT(*) FROM quota_outbox").Scan(&all).Error; err != nil {
		g.t.Fatal(err)
	}
	return unsent, all
}

func (g *rig) waitDrained() {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if unsent, _ := g.outboxRows(); unsent == 0 {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatal("outbox not drained within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// published reads the topic: every message, decoded, per merchant in
// partition order, and how many copies each id had.
func (g *rig) published() (map[string][]quotaevent.Message, map[string]int) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string][]quotaevent.Message{}
	copies := map[string]int{}
	schema := schemas.MustCompile(schemas.QuotaEvents)
	for _, m := range g.kafka.ReadAll(ctx, g.t, g.topic, partitions) {
		if err := schema.Validate(m.Value); err != nil {
			g.t.Fatalf("message %s breaks schemas/quota-events.schema.json: %v", m.Value, err)
		}
		var msg quotaevent.Message
		if err := json.Unmarshal(m.Value, &msg); err != nil {
			g.t.Fatalf("message %s: %v", m.Value, err)
		}
		if string(m.Key) != msg.MerchantID {
			g.t.Fatalf("message %s keyed %q", msg.ID, m.Key)
		}
		copies[msg.ID]++
		if copies[msg.ID] == 1 {
			out[msg.MerchantID] = append(out[msg.MerchantID], msg)
		}
	}
	return out, copies
}

// truth is what the ledger's rows imply, per merchant, as "id before->after".
func (g *rig) truth(events ledgerdb.Events) map[string][]string {
	g.t.Helper()
	var rows []ledger.Row
	if err := g.db.Find(&rows).Error; err != nil {
		g.t.Fatal(err)
	}
	var bals []ledger.Balance
	if err := g.db.Find(&bals).Error; err != nil {
		g.t.Fatal(err)
	}
	settings := map[string]ledger.Balance{}
	for _, b := range bals {
		settings[b.MerchantID] = b
	}
	out := map[string][]string{}
	for m, r := range ledger.Replay(rows, settings, events.DefaultAlerts) {
		for _, e := range r.Events {
			out[m] = append(out[m], fmt.Sprintf("%s %d->%d", e.ID, e.BalanceBefore, e.BalanceAfter))
		}
	}
	return out
}

// flaky publishes through w, and now and then fails a write that the broker
// took (a crash after the publish, before the mark) or one it never saw.
type flaky struct {
	w      Writer
	mu     sync.Mutex
	rnd    *rand.Rand
	failed atomic.Int64
}

var errInjected = errors.New("injected: lost after the write")

func (f *flaky) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	f.mu.Lock()
	p := f.rnd.IntN(4)
	f.mu.Unlock()
	switch p {
	case 0:
		f.failed.Add(1)
		return errors.New("injected: not sent")
	case 1:
		if err := f.w.WriteMessages(ctx, msgs...); err != nil {
			return err
		}
		f.failed.Add(1)
		return errInjected
	}
	return f.w.WriteMessages(ctx, msgs...)
}

// TestPublishedCrossingsAreTheLedgers: random batches of debits and
// rejections over a few merchants, redelivered batches, grants in between,
// the relay stopped (a crash) at random points, including after the broker
// took a write it was not told of: the published events, deduplicated by id,
// are exactly those the ledger's running balance implies, in order per merchant.
func TestPublishedCrossingsAreTheLedgers(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -outbox.seed=%d)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	events := ledgerdb.Events{DefaultAlerts: quotaevent.Alerts{Units: 300, Percent: 20}}
	g := newRig(t, events)
	ctx := context.Background()
	merchants := []string{"m-a", "m-b", "m-c", "m-d"}
	balance := map[string]int64{}
	for _, m := range merchants {
		if err := grant(ctx, g.store, m, 500+rnd.Int64N(1000), "grant-start-"+m); err != nil {
			t.Fatal(err)
		}
		bals, _ := g.store.Balances(ctx, []string{m})
		balance[m] = bals[m].Available()
	}
	w := &flaky{w: g.writer, rnd: rand.New(rand.NewPCG(seed, 2))}
	stop := g.run(w, Config{BatchSize: 7})
	var done [][]ledger.Row
	evt := 0
	for round := range 120 {
		switch p := rnd.IntN(10); {
		case p == 0 && len(done) > 0: // a redelivered batch: nothing new
			b := done[rnd.IntN(len(done))]
			// Rolled back either way: a duplicate, or a guard that the balance now refuses.
			if err := g.store.Commit(ctx, cloneRows(b)); !errors.Is(err, ledger.ErrDuplicate) && !errors.Is(err, ledger.ErrGuard) {
				t.Fatalf("redelivered batch: %v, want ErrDuplicate or ErrGuard", err)
			}
		case p == 1: // a grant
			m := merchants[rnd.IntN(len(merchants))]
			amount := 1 + rnd.Int64N(800)
			if err := grant(ctx, g.store, m, amount, fmt.Sprintf("grant-%d-%s", round, m)); err != nil {
				t.Fatal(err)
			}
			balance[m] += amount
		case p == 2: // a crash of the relay, then a new one
			stop()
			stop = g.run(w, Config{BatchSize: 1 + rnd.IntN(20)})
		default:
			var rows []ledger.Row
			for range 1 + rnd.IntN(12) {
				m := merchants[rnd.IntN(len(merchants))]
				amount := 1 + rnd.Int64N(150)
				evt++
				r := ledger.Row{EventID: fmt.Sprintf("evt-%d", evt), MerchantID: m, Kind: ledger.KindDebit, Amount: amount,
					Reason: ledger.ReasonPayment, Source: "pc", OccurredAt: time.Now().UTC()}
				if balance[m] < amount {
					r.Kind, r.Reason = ledger.KindRejected, ledger.ReasonInsufficient
				} else {
					balance[m] -= amount
				}
				rows = append(rows, r)
			}
			if err := g.store.Commit(ctx, rows); err != nil {
				t.Fatalf("commit: %v", err)
			}
			done = append(done, rows)
		}
	}
	g.waitDrained()
	stop()

	got, copies := g.published()
	want := g.truth(events)
	crossings := 0
	for _, m := range merchants {
		var have []string
		for _, msg := range got[m] {
			have = append(have, fmt.Sprintf("%s %d->%d", msg.ID, msg.BalanceBefore, msg.BalanceAfter))
		}
		if fmt.Sprint(have) != fmt.Sprint(want[m]) {
			t.Errorf("merchant %s:\npublished %q\nledger    %q", m, have, want[m])
		}
		crossings += len(want[m]) - 1
	}
	dups := 0
	for _, n := range copies {
		dups += n - 1
	}
	t.Logf("%d events beyond the first grants, %d ids published more than once, %d failed writes", crossings, dups, w.failed.Load())
	if crossings < 10 {
		t.Fatalf("only %d events: the test exercised too little", crossings)
	}
}

func cloneRows(rows []ledger.Row) []ledger.Row {
	out := make([]ledger.Row, len(rows))
	for i, r := range rows {
		r.ID, r.BalanceAfter = 0, nil
		out[i] = r
	}
	return out
}

// TestRelayOutageDelaysWithoutLoss: while the broker refuses every write the
// outbox grows and says so (metrics), nothing is lost; afterwards every event
// is published and the published rows are pruned.
func TestRelayOutageDelaysWithoutLoss(t *testing.T) {
	g := newRig(t, ledgerdb.Events{PerPayment: true})
	kf := g.kafka.FaultHooks(t)
	ctx := context.Background()
	if err := grant(ctx, g.store, "m-1", 1000, "grant-1"); err != nil {
		t.Fatal(err)
	}
	fault := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: g.topic, Err: kerr.NotLeaderForPartition, Count: -1})
	defer fault.Remove()
	stop := g.run(g.writer, Config{BatchSize: 50})
	defer func() { stop() }()
	const n = 200
	for i := range n {
		r := ledger.Row{EventID: fmt.Sprintf("evt-%d", i), MerchantID: "m-1", Kind: ledger.KindDebit, Amount: 1,
			Reason: ledger.ReasonPayment, Source: "pc", OccurredAt: time.Now().UTC()}
		if err := g.store.Commit(ctx, []ledger.Row{r}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "publish retried during the outage", func() bool {
		return testutil.ToFloat64(g.m.errors.WithLabelValues("publish")) >= 2 && testutil.ToFloat64(g.m.unsent) == n+1
	})
	if testutil.ToFloat64(g.m.oldestSeconds) <= 0 {
		t.Error("oldest unsent age is 0 during the outage")
	}
	if unsent, _ := g.outboxRows(); unsent != n+1 {
		t.Fatalf("%d unsent rows during the outage, want %d", unsent, n+1)
	}
	fault.Remove()
	g.waitDrained()
	waitFor(t, "published rows pruned and the gauges back to 0", func() bool {
		_, all := g.outboxRows()
		return all == 0 && testutil.ToFloat64(g.m.unsent) == 0 && testutil.ToFloat64(g.m.oldestSeconds) == 0
	})
	stop()
	stop = func() {}
	got, _ := g.published()
	ids := map[string]bool{}
	for _, msg := range got["m-1"] {
		ids[msg.ID] = true
	}
	if !ids["grant-1/quota.granted"] || len(ids) != n+1 {
		t.Fatalf("published %d distinct events, want %d (the grant and one per payment)", len(ids), n+1)
	}
	var seq []string
	for _, msg := range got["m-1"][1:] {
		seq = append(seq, msg.ID)
	}
	if !sort.SliceIsSorted(seq, func(i, j int) bool { return eventNo(seq[i]) < eventNo(seq[j]) }) {
		t.Fatalf("payments published out of order: %v", seq)
	}
	if testutil.ToFloat64(g.m.pruned) < n+1 {
		t.Errorf("pruned counter %v, want >= %d", testutil.ToFloat64(g.m.pruned), n+1)
	}
}

func eventNo(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "evt-%d/", &n)
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// grant records one credit, its refusal or conflict as the error.
func grant(ctx context.Context, s *ledgerdb.Store, merchant string, amount int64, id string) error {
	out, err := s.Grant(ctx, []ledger.Credit{{ID: id, MerchantID: merchant, Amount: amount, Source: "test"}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// TestOneRelayAtATime: of two relays on one database one publishes, the
// other stands by; when the first stops, the second takes over and
// publishes what came since.
func TestOneRelayAtATime(t *testing.T) {
	g := newRig(t, ledgerdb.Events{})
	ctx := context.Background()
	m1, m2 := g.m, func() *Metrics { m, _ := NewMetrics(nil); return m }()
	stop1 := g.runWith(g.writer, Config{}, m1)
	waitFor(t, "the first relay leads", func() bool { return testutil.ToFloat64(m1.leader) == 1 })
	stop2 := g.runWith(g.writer, Config{}, m2)
	defer stop2()
	if err := grant(ctx, g.store, "m-1", 10, "g-1"); err != nil {
		t.Fatal(err)
	}
	g.waitDrained()
	time.Sleep(200 * time.Millisecond) // the second relay's tries to lead
	if testutil.ToFloat64(m2.leader) != 0 || testutil.ToFloat64(m2.published) != 0 {
		t.Fatal("the second relay published while the first held the lock")
	}
	stop1()
	if err := grant(ctx, g.store, "m-2", 10, "g-2"); err != nil {
		t.Fatal(err)
	}
	g.waitDrained()
	if testutil.ToFloat64(m2.published) != 1 || testutil.ToFloat64(m1.published) != 1 {
		t.Fatalf("published: first %v, second %v; want 1 each", testutil.ToFloat64(m1.published), testutil.ToFloat64(m2.published))
	}
}
