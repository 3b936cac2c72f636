package worker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/event"
)

// TestOneBatch runs one lane batch of payments, decoded as the consumer
// decodes them, through the worker's handler on the real write path: every
// event is applied. The batch follows a warm-up batch (which hydrates the
// quota hashes and prepares the statements), which runs alone with
// BILLING_CODEMAP_WARMUP_ONLY set: the code map's count in internal/doccmd
// compares the two runs' coverage to find the files the second batch touched.
func TestOneBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 1)
	g.env["LOCK_TTL"], g.env["IDGEN_LEASE_TTL"] = "1m", "1m" // no renewal runs during the batch
	w, err := New(ctx, g.config(1), zap.NewNop(), Options{NoHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	merchants := []string{"m-1", "m-2", "m-3"}
	grantAll(t, w, merchants, 1000)
	m, err := registerAll(prometheus.NewRegistry(), g.config(1).Kafka)
	if err != nil {
		t.Fatal(err)
	}
	h := &billingHandler{deductor: w.path.Deductor, metrics: m.handler, log: zap.NewNop()}
	r := router{shards: w.path.Shards}
	batch := func(n int) {
		var items []consumer.Item[event.PaymentSucceeded]
		for i := range 30 {
			mid := merchants[i%len(merchants)]
			msg := kafka.Message{Topic: g.topic, Offset: int64(n*30 + i), Key: []byte(mid), Value: event.PaymentSucceeded{
				EventID: fmt.Sprintf("e-%d-%d", n, i), PaymentID: fmt.Sprintf("p-%d-%d", n, i), MerchantID: mid,
				Amount: 1, Source: event.SourcePC, OccurredAt: time.Now(),
			}.Encode()}
			v, _, err := r.decode(msg)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, consumer.Item[event.PaymentSucceeded]{Msg: msg, Value: v})
		}
		errs, err := h.HandleBatch(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("event %d: %v", i, e)
			}
		}
	}
	batch(0) // hydrates the quota hashes and prepares the statements: a first batch's work
	want := int64(60)
	if os.Getenv("BILLING_CODEMAP_WARMUP_ONLY") != "" {
		want = 30
	} else {
		batch(1)
	}
	var n int64
	if err := g.db.SQL.QueryRowContext(ctx, "SELECT COUNT(*) FROM quota_ledger WHERE kind = 'debit'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%d debit rows, want %d", n, want)
	}
}
