package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "s3cret-token-0123456789"

// rig is one test's read API on its own MySQL database and Redis prefix, with
// the real write path to make ledger rows and pending deductions.
type rig struct {
	t         testing.TB
	redis     *testenv.Redis
	db        *testenv.MySQL
	store     *ledgerdb.Store
	d         *deduct.Deductor
	tokenPath string
	reg       *prometheus.Registry
	logs      *observer.ObservedLogs // what the API logged, beside the test's log
	api       *adminapi.API
	kafka     *testenv.Kafka
	dlqTopic  string
	transport *kafka.Transport
}

func newRig(t testing.TB, opts adminapi.Options) *rig {
	t.Helper()
	g := &rig{t: t, redis: testenv.NewRedis(t), db: testenv.NewMySQL(t), reg: prometheus.NewRegistry()}
	gen, err := idgen.New(7, idgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.store, err = ledgerdb.New(g.db.SQL, idgen.Int64s{Generator: gen}, nil, ledgerdb.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.store.Close() })
	locks, err := lock.New(g.redis.Client, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	if g.d, err = deduct.New(g.redis.Client, g.redis.Keys, deduct.MerchantLocks(locks, g.redis.Keys, 5*time.Second), g.store, nil, nil,
		deduct.Options{Shards: shard.NewCache(shard.NewStore(g.db.SQL), 0, nil)}); err != nil {
		t.Fatal(err)
	}
	g.tokenPath = filepath.Join(t.TempDir(), "token")
	g.writeToken(testToken)
	if opts.Rate == 0 {
		opts.Rate, opts.Burst = 1000, 1000
	}
	opts.TokenFile = g.tokenPath
	m, err := adminapi.NewMetrics(g.reg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	g.logs = logs
	log := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })))
	g.kafka, g.transport = testenv.NewKafka(t), &kafka.Transport{}
	t.Cleanup(g.transport.CloseIdleConnections)
	g.dlqTopic = g.kafka.Topic(t, 2)
	dc, err := dlq.NewClient(dlq.Broker{Addrs: g.kafka.Brokers, Transport: g.transport})
	if err != nil {
		t.Fatal(err)
	}
	if g.api, err = adminapi.New(g.d, g.store, adminapi.NewEvents(g.db.SQL, dc, g.dlqTopic), opts, log, m); err != nil {
		t.Fatal(err)
	}
	return g
}

// deadLetter writes DLQ records as the worker does, keyed by their root.
func (g *rig) deadLetter(recs ...dlq.Record) {
	g.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(g.kafka.Brokers...), Topic: g.dlqTopic, Transport: g.transport, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = r.KafkaMessage()
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		g.t.Fatal(err)
	}
}

// writeToken replaces the token file, with a modification time of its own
// so the change shows whatever the file system's time resolution.
func (g *rig) writeToken(token string) {
	g.t.Helper()
	if err := os.WriteFile(g.tokenPath, []byte(token+"\n"), 0o600); err != nil {
		g.t.Fatal(err)
	}
	mod := time.Now().Add(time.Duration(len(token)) * time.Hour)
	if err := os.Chtimes(g.tokenPath, mod, mod); err != nil {
		g.t.Fatal(err)
	}
}

// do serves one request with the test token (token "" sends no Authorization).
func (g *rig) do(method, target, token string) *httptest.ResponseRecorder {
	g.t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	g.api.ServeHTTP(rec, req)
	return rec
}

// get serves an authenticated GET and decodes a 200 answer into v.
func (g *rig) get(target string, v any) {
	g.t.Helper()
	rec := g.do(http.MethodGet, target, testToken)
	if rec.Code != http.StatusOK {
		g.t.Fatalf("GET %s = %d %s", target, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		g.t.Fatalf("GET %s: %v in %s", target, err, rec.Body)
	}
}

func (g *rig) grant(merchant string, amount int64) {
	g.t.Helper()
	if _, err := g.d.Grant(context.Background(), merchant, amount, fmt.Sprintf("grant-%s-%d", merchant, time.Now().UnixNano())); err != nil {
		g.t.Fatal(err)
	}
}

// apply applies the payments as one batch.
func (g *rig) apply(events ...event.PaymentSucceeded) {
	g.t.Helper()
	if _, err := g.d.Apply(context.Background(), events); err != nil {
		g.t.Fatal(err)
	}
}

// pay applies one batch of n payments of amount each for merchant.
func (g *rig) pay(merchant string, n int, amount int64) {
	g.t.Helper()
	events := make([]event.PaymentSucceeded, n)
	for i := range events {
		id := fmt.Sprintf("evt-%s-%d-%d", merchant, time.Now().UnixNano(), i)
		events[i] = event.PaymentSucceeded{EventID: id, PaymentID: "pay-" + id, MerchantID: merchant, Amount: amount,
			Source: event.SourcePC, OccurredAt: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)}
	}
	if _, err := g.d.Apply(context.Background(), events); err != nil {
		g.t.Fatal(err)
	}
}

// ledgerIDs are the ids of merchant's ledger rows, read from MySQL directly.
func (g *rig) ledgerIDs(merchant string) []string {
	g.t.Helper()
	var ids []string
	if err := g.db.DB.Raw("SELECT CAST(id AS CHAR) FROM quota_ledger WHERE merchant_id = ? ORDER BY seq", merchant).Scan(&ids).Error; err != nil {
		g.t.Fatal(err)
	}
	return ids
}

// The response documents as a client reads them.
type balance struct {
	MerchantID string `json:"merchant_id"`
	MySQL      struct {
		Credited, Debited, Available int64
		OverdraftPolicy              string `json:"overdraft_policy"`
		OverdraftFloor               int64  `json:"overdraft_floor"`
	} `json:"mysql"`
	Redis struct {
		Exists  bool   `json:"exists"`
		Remain  *int64 `json:"remain"`
		Version *int64 `json:"version"`
	} `json:"redis"`
	Pending []struct {
		EventID  string `json:"event_id"`
		Amount   int64  `json:"amount"`
		InLedger bool   `json:"in_ledger"`
	} `json:"pending"`
	PendingAmount  int64  `json:"pending_amount"`
	ExpectedRemain int64  `json:"expected_remain"`
	Drift          *int64 `json:"drift"`
}

type page struct {
	MerchantID string `json:"merchant_id"`
	Rows       []struct {
		ID         string `json:"id"`
		Seq        int64  `json:"seq"`
		MerchantID string `json:"merchant_id"`
		Kind       string `json:"kind"`
		Amount     int64  `json:"amount"`
	} `json:"rows"`
	Next string `json:"next"`
}

// requests is billing_admin_requests_total{route, code}.
func (g *rig) requests(route, code string) float64 {
	g.t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		g.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "billing_admin_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
