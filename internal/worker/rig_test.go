package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/testenv"
)

// rig is one test's own slice of Kafka, MySQL and Redis, and workers on it.
type rig struct {
	t         testing.TB
	kafka     *testenv.Kafka
	db        *testenv.MySQL
	redisAddr string
	prefix    string
	topic     string
	dlqTopic  string
	grants    string // the grants topic
	refunds   string // the refunds topic
	group     string
	env       map[string]string
	// transport carries the test's own Kafka requests, closed at cleanup so
	// goleak sees no pooled connection.
	transport *kafka.Transport
}

func newRig(t testing.TB, partitions int) *rig {
	k := testenv.NewKafka(t)
	r := testenv.NewRedis(t)
	g := &rig{t: t, kafka: k, db: testenv.NewMySQL(t), redisAddr: r.Addr, prefix: r.Keys.Prefix(),
		topic: k.Topic(t, partitions), dlqTopic: k.Topic(t, 1), grants: k.Topic(t, partitions), refunds: k.Topic(t, partitions)}
	g.group = g.topic + "-group"
	g.transport = &kafka.Transport{}
	t.Cleanup(g.transport.CloseIdleConnections)
	g.env = map[string]string{
		"KAFKA_BROKERS": joinComma(k.Brokers), "KAFKA_TOPIC": g.topic, "KAFKA_DLQ_TOPIC": g.dlqTopic, "KAFKA_GROUP": g.group,
		"KAFKA_GRANTS_TOPIC": g.grants, "KAFKA_REFUNDS_TOPIC": g.refunds,
		"REDIS_ADDR": g.redisAddr, "REDIS_KEY_PREFIX": g.prefix, "MYSQL_DSN": g.db.DSN,
		"HTTP_ADDR": "127.0.0.1:0", "LOCK_TTL": "3s", "IDGEN_LEASE_TTL": "3s", "SHUTDOWN_TIMEOUT": "5s",
		"WORKER_LATENCY_BUDGET": "2ms", "WORKER_MAX_ATTEMPTS": "3", "WORKER_COMMIT_INTERVAL": "200ms",
	}
	return g
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func (g *rig) config(workerID int) config.Config {
	g.t.Helper()
	env := map[string]string{"IDGEN_WORKER_ID": fmt.Sprint(workerID)}
	for k, v := range g.env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedKafka, config.NeedWorkerID)
	if err != nil {
		g.t.Fatal(err)
	}
	return cfg
}

// runningWorker is a worker started in the background; stop waits for it.
type runningWorker struct {
	*Worker
	cancel context.CancelFunc
	done   chan error
}

func (g *rig) start(workerID int, opts Options) *runningWorker {
	g.t.Helper()
	log := zaptest.NewLogger(g.t, zaptest.Level(zap.WarnLevel)).With(zap.Int("worker", workerID))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := New(ctx, g.config(workerID), log, opts)
	if err != nil {
		cancel()
		g.t.Fatal(err)
	}
	rw := &runningWorker{Worker: w, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	g.t.Cleanup(func() { rw.stop(g.t) })
	return rw
}

func (rw *runningWorker) stop(t testing.TB) {
	t.Helper()
	if rw.cancel == nil {
		return
	}
	rw.cancel()
	rw.cancel = nil
	select {
	case err := <-rw.done:
		if err != nil {
			t.Errorf("worker Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop within 20s")
	}
}

func (g *rig) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(g.kafka.Brokers...), Timeout: 10 * time.Second, Transport: g.transport}
}

func (g *rig) produce(ctx context.Context, msgs []kafka.Message) {
	g.t.Helper()
	g.produceTo(ctx, g.topic, msgs)
}

func (g *rig) produceTo(ctx context.Context, topic string, msgs []kafka.Message) {
	g.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(g.kafka.Brokers...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, Transport: g.transport}
	defer w.Close()
	if err := scenario.Produce(ctx, w, msgs, nil); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rig) drain(ctx context.Context) {
	g.t.Helper()
	if err := scenario.WaitDrained(ctx, g.client(), g.group, g.topic, nil); err != nil {
		g.t.Fatal(err)
	}
}

// drainGrants waits until the grants group has committed the whole grants topic.
func (g *rig) drainGrants(ctx context.Context) {
	g.t.Helper()
	if err := scenario.WaitDrained(ctx, g.client(), g.group+".grants", g.grants, nil); err != nil {
		g.t.Fatal(err)
	}
}

// drainRefunds waits until the refunds group has committed the whole refunds topic.
func (g *rig) drainRefunds(ctx context.Context) {
	g.t.Helper()
	if err := scenario.WaitDrained(ctx, g.client(), g.group+".refunds", g.refunds, nil); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rig) dlqRecords(ctx context.Context) []dlq.Record {
	g.t.Helper()
	recs, err := g.dlqClient().Records(ctx, g.dlqTopic)
	if err != nil {
		g.t.Fatal(err)
	}
	return recs
}

func (g *rig) check(ctx context.Context, w *Worker, produced invariant.Produced, records []dlq.Record) *invariant.Report {
	g.t.Helper()
	rep, err := invariant.Check(ctx, produced, invariant.State{DB: g.db.DB, Redis: w.svc.Redis, Keys: w.svc.Keys, DLQ: records, RedisSettled: true})
	if err != nil {
		g.t.Fatal(err)
	}
	return rep
}
