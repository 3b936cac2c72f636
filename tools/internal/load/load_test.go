package load

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// A tiny load end to end, preloaded and then paced, through the real
// billing-worker binary.
func TestRun(t *testing.T) {
	db := testenv.NewMySQL(t) // the run makes its own database on this server
	rdb := testenv.NewRedis(t)
	bin := workerBinary(t)
	opts := func() Options {
		return Options{
			WorkerBinary: bin, MySQLDSN: db.DSN, Redis: rdb.Client, RedisAddrs: []string{rdb.Addr}, KeyPrefix: rdb.Keys.Prefix(),
			Merchants: 20, Hot: 0.2, Events: 2000, Partitions: 4, SampleEvery: 100 * time.Millisecond,
			Stall: 20 * time.Second, Timeout: 2 * time.Minute,
		}
	}
	ctx := context.Background()

	t.Run("preloaded", func(t *testing.T) {
		o := opts()
		o.LedgerRows, o.BaselineEvents = 3000, 300
		// Batches smaller than the run: 2,000 events in one batch share one
		// created_at, and a steady rate needs two.
		o.WorkerEnv = []string{"WORKER_BATCH_SIZE=256"}
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != 2000 || res.Setup.LedgerRows != 3000 || !res.Setup.Embedded {
			t.Fatalf("rows %d (want 2000, one per event) after %d pre-filled, embedded %v", res.Rows, res.Setup.LedgerRows, res.Setup.Embedded)
		}
		if res.EventsPerSec <= 0 || res.ElapsedS <= 0 || res.SteadyPerSec <= 0 {
			t.Fatalf("events/s %v over %vs (steady %v)", res.EventsPerSec, res.ElapsedS, res.SteadyPerSec)
		}
		cpu := map[string]ProcessCPU{}
		for _, c := range res.CPU {
			cpu[c.Name] = c
		}
		for _, name := range []string{"worker-0", "mariadbd", "broker"} {
			if c := cpu[name]; !c.Measured || c.CPUSeconds <= 0 || c.USPerEvent <= 0 {
				t.Errorf("%s: %+v, want a positive CPU figure", name, c)
			}
		}
		// Redis may spend less than one 10 ms tick on 2,000 events: measured, not necessarily positive.
		if c := cpu["redis-server"]; !c.Measured || c.PID == 0 {
			t.Errorf("redis-server: %+v, want measured", c)
		}
		if res.SystemUSPerEvent <= 0 || res.SystemCores() <= 0 {
			t.Errorf("system CPU per event %v, cores %v", res.SystemUSPerEvent, res.SystemCores())
		}
		if b := res.Baseline; b == nil || b.Error != "" || b.EventsPerSec <= 0 || b.Ratio <= 0 {
			t.Errorf("baseline %+v", b)
		}
		if i := res.InnoDB; i.LedgerDataBytes <= 0 || i.ReadRequestsPerEvent <= 0 || i.RedoBytesPerEvent <= 0 || i.PagesFlushedPerEvent < 0 {
			t.Errorf("innodb %+v", i)
		}
		if d := res.InnoDB.Deadlocks; d.Server < 0 || d.Per100k != float64(d.Server)*100_000/2000 || res.LedgerRetries < 0 {
			t.Errorf("deadlocks %+v, ledger retries %d", d, res.LedgerRetries)
		}
		if h := res.Host; h.BufferPoolBytes <= 0 || h.RedoLogBytes <= 0 {
			t.Errorf("host %+v, want the buffer pool and redo log sizes", h)
		}
		if len(res.Memory) != 1 || res.Memory[0].RSSMaxMiB <= 0 {
			t.Errorf("memory %+v", res.Memory)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil || back["events_per_sec"].(float64) != res.EventsPerSec || back["worker_ledger_deadlock_retries"] == nil ||
			back["innodb"].(map[string]any)["deadlocks"].(map[string]any)["innodb_deadlocks_per_100k_events"] == nil {
			t.Fatalf("JSON round trip: %v, %s", err, b)
		}
		checkRemoved(t, db, rdb, res.Setup)
	})

	// A tenth of the events refunds, after their payments (produced once the
	// payments are recorded) or racing them (preloaded together): the run
	// ends when every payment is debited and every refund recorded, and
	// counts one debit per payment.
	t.Run("refunds", func(t *testing.T) {
		msgs, err := workload.Generate(workload.Config{Seed: opts().Seed, Merchants: opts().Merchants, Skew: workload.HotSkew(opts().Hot), Refunds: 0.1}, opts().Events)
		if err != nil {
			t.Fatal(err)
		}
		payments, refunds := 0, 0
		for _, m := range msgs {
			switch {
			case m.Topic == workload.Payments:
				payments++
			case m.Kind == workload.Valid:
				refunds++
			}
		}
		for _, order := range []RefundsOrder{RefundsAfter, RefundsRacing} {
			t.Run(string(order), func(t *testing.T) {
				o := opts()
				o.Refunds, o.RefundsOrder = 0.1, order
				res, err := Run(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				if res.Rows != int64(payments) || payments >= 2000 || res.Refunds != refunds || refunds == 0 || res.Events != 2000 || res.EventsPerSec <= 0 {
					t.Fatalf("rows %d and %d refunds, want %d and %d (events %d, %.0f/s)", res.Rows, res.Refunds, payments, refunds, res.Events, res.EventsPerSec)
				}
				if s := res.Setup; s.Refunds != 0.1 || s.RefundsOrder != order {
					t.Fatalf("setup %+v", s)
				}
				checkRemoved(t, db, rdb, res.Setup)
			})
		}
	})

	t.Run("paced", func(t *testing.T) {
		o := opts()
		o.Rate, o.Warmup = 2000, 200*time.Millisecond
		o.SampleEvery = 100 * time.Millisecond // the transactions are read between samples after the warm-up
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		p := res.Paced
		if p == nil || res.Rows != 2000 {
			t.Fatalf("paced %+v, rows %d", p, res.Rows)
		}
		// 2,000 events at 2,000/s: about a second; never much less.
		if p.ScheduleS != 1 || res.ElapsedS < 0.999 {
			t.Fatalf("schedule %vs, elapsed %vs: finished before the schedule", p.ScheduleS, res.ElapsedS)
		}
		l := p.Latency
		if l.Count == 0 || l.WarmupSkipped == 0 || l.Count+l.WarmupSkipped != 2000 || l.P50MS <= 0 || l.P50MS > l.P99MS || l.P99MS > l.MaxMS {
			t.Fatalf("latency %+v", l)
		}
		if a := p.Ack; a.Count != l.Count || a.P50MS <= 0 {
			t.Fatalf("produce->ack %+v (latency %+v)", a, l)
		}
		// Each event's second leg is its latency less its first: shorter.
		if a := p.AfterAck; a.Count != l.Count || a.P50MS >= l.P50MS || a.MaxMS >= l.MaxMS {
			t.Fatalf("ack->ledger %+v (latency %+v)", a, l)
		}
		if tx := p.LedgerTx; tx == nil || tx.Count == 0 || tx.P50MS <= 0 || tx.P50MS > tx.P99MS {
			t.Fatalf("ledger transaction %+v", tx)
		}
		checkRemoved(t, db, rdb, res.Setup)
	})

	t.Run("idle", func(t *testing.T) {
		o := opts()
		o.Idle, o.IdleSettle = time.Second, 200*time.Millisecond
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		i := res.Idle
		if i == nil || res.Rows != 1 || i.WindowS < 1 || i.Cores < 0 || i.WakeMS <= 0 {
			t.Fatalf("idle %+v, rows %d; want a window of a second and one event's wake", i, res.Rows)
		}
		measured := false
		for _, c := range res.CPU {
			measured = measured || c.Name == "worker-0" && c.Measured && c.USPerEvent == 0
		}
		if !measured {
			t.Errorf("cpu %+v, want the worker measured in cores, not per event", res.CPU)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatal(err)
		}
		checkRemoved(t, db, rdb, res.Setup)
	})
}

// With --brokers the run makes topics of its own there, and deletes them;
// the broker's CPU is not this machine's to read.
func TestRunExternalBroker(t *testing.T) {
	db := testenv.NewMySQL(t)
	rdb := testenv.NewRedis(t)
	k := testenv.NewKafka(t)
	res, err := Run(context.Background(), Options{
		WorkerBinary: workerBinary(t), MySQLDSN: db.DSN, Redis: rdb.Client, RedisAddrs: []string{rdb.Addr},
		KeyPrefix: rdb.Keys.Prefix(), Brokers: k.Brokers, Merchants: 10, Events: 500, Partitions: 2, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 500 || res.Setup.Embedded || res.Setup.Topic == "payment.succeeded" {
		t.Fatalf("rows %d, embedded %v, topic %s: want 500 rows on a topic of the run's own", res.Rows, res.Setup.Embedded, res.Setup.Topic)
	}
	for _, c := range res.CPU {
		if c.Name == "broker" {
			t.Fatalf("an external broker's CPU reported: %+v", c)
		}
	}
	conn, err := kafka.Dial("tcp", k.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if strings.HasPrefix(p.Topic, "load-") {
			t.Fatalf("topic %s left behind", p.Topic)
		}
	}
	checkRemoved(t, db, rdb, res.Setup)
}

// checkRemoved: the run's database and Redis keys are gone.
func checkRemoved(t *testing.T, db *testenv.MySQL, rdb *testenv.Redis, s Setup) {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", s.Database).Scan(&n); err != nil || n != 0 {
		t.Errorf("database %s still there (%d, %v)", s.Database, n, err)
	}
	if keys, err := rdb.Client.Keys(context.Background(), s.KeyPrefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("redis keys under %s remain: %v, %v", s.KeyPrefix, keys, err)
	}
}

// The pre-filled ledger agrees with the balances: each merchant's credit rows
// sum to credited, its debit rows to debited, and its last row's
// balance_after is what remains.
func TestGrantPrefill(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered ids %v", ordered), func(t *testing.T) { testGrantPrefill(t, ordered) })
	}
}

func testGrantPrefill(t *testing.T, ordered bool) {
	db := testenv.NewMySQL(t)
	merchants := workload.MerchantIDs(7)
	f, err := grant(context.Background(), db.SQL, merchants, 12_345, "ldtest-", 100, ordered)
	if err != nil {
		t.Fatal(err)
	}
	if ordered { // every pre-filled id sorts before the run's ("ldtest-100" on)
		var after int
		if err := db.SQL.QueryRow("SELECT COUNT(*) FROM quota_ledger WHERE kind = 'debit' AND event_id >= 'ldtest-0'").Scan(&after); err != nil || after != 0 {
			t.Fatalf("%d pre-filled ids sort among the run's (%v)", after, err)
		}
	}
	var rows, maxID int64
	if err := db.SQL.QueryRow("SELECT COUNT(*), MAX(id) FROM quota_ledger").Scan(&rows, &maxID); err != nil {
		t.Fatal(err)
	}
	if rows != 12_345+7 || maxID != f.lastID {
		t.Fatalf("%d rows, max id %d; want %d rows, max id %d", rows, maxID, 12_345+7, f.lastID)
	}
	var bad int
	err = db.SQL.QueryRow(`SELECT COUNT(*) FROM merchant_balance b JOIN (
		SELECT merchant_id, SUM(IF(kind = 'credit', amount, 0)) c, SUM(IF(kind IN ('debit', 'expire'), amount, 0)) d FROM quota_ledger GROUP BY merchant_id
	) s USING (merchant_id) WHERE s.c <> b.credited OR s.d <> b.debited
	OR (SELECT balance_after FROM quota_ledger l WHERE l.merchant_id = b.merchant_id ORDER BY id DESC LIMIT 1) <> b.credited - b.debited`).Scan(&bad)
	if err != nil || bad != 0 {
		t.Fatalf("%d merchants whose ledger and balance disagree (%v)", bad, err)
	}
	var debited int64
	if err := db.SQL.QueryRow("SELECT SUM(debited) FROM merchant_balance").Scan(&debited); err != nil || debited != f.debited {
		t.Fatalf("debited %d, fill says %d (%v)", debited, f.debited, err)
	}
}

func TestScatterIsAPermutation(t *testing.T) {
	for _, n := range []int{1, 2, 7, 1000, 65536} {
		seen := make([]bool, n)
		ascending := 0
		for j := range n {
			k := scatter(j, n)
			if k < 0 || k >= n || seen[k] {
				t.Fatalf("scatter(%d, %d) = %d: out of range or repeated", j, n, k)
			}
			seen[k] = true
			if j > 0 && k == scatter(j-1, n)+1 {
				ascending++
			}
		}
		if n >= 1000 && ascending > n/100 {
			t.Errorf("n=%d: %d of the steps ascend by one: not scattered", n, ascending)
		}
	}
}

// A row's due time comes back from the database in whole microseconds, a
// microsecond either side of the schedule's nanoseconds: it still names its
// step.
func TestScheduleStep(t *testing.T) {
	p := produced{step: 100 * time.Microsecond, ackedAt: make([]int64, 3)}
	for _, c := range []struct {
		dueUS int64
		k     int
		ok    bool
	}{
		{0, 0, true}, {-1, 0, true}, {99, 1, true}, {101, 1, true}, {200, 2, true},
		{299, 3, false}, {-60, 0, false},
	} {
		if k, ok := p.seq(c.dueUS); ok != c.ok || (ok && k != c.k) {
			t.Errorf("seq(%d) = %d, %v; want %d, %v", c.dueUS, k, ok, c.k, c.ok)
		}
	}
	if _, ok := (&produced{}).seq(0); ok {
		t.Error("an unpaced run has no steps")
	}
}
