package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
)

// BenchmarkTopic1000 times 1,000 messages through a running worker, from the
// first produce until the last one's ledger row is in MySQL: payment events
// (deductions) against grant commands (credits), over the same 50 merchants.
// One op is 1,000 messages.
//
//	go test -run '^$' -bench Topic1000 -benchtime 5x ./internal/app/
func BenchmarkTopic1000(b *testing.B) {
	const n, merchants = 1000, 50
	g := newRig(b, 4)
	w := g.start(1, WorkerOptions{NoHTTP: true})
	ctx := context.Background()
	seed := make([]event.GrantCommand, merchants)
	for m := range seed {
		seed[m] = event.GrantCommand{GrantID: fmt.Sprintf("seed-%d", m), MerchantID: fmt.Sprintf("m-%d", m), Amount: 1 << 40}
	}
	if _, err := w.Deductor.GrantBatch(ctx, seed); err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"payments", "grants"} {
		b.Run(kind, func(b *testing.B) {
			for i := range b.N {
				b.StopTimer()
				prefix := fmt.Sprintf("%s-%d-", kind, i)
				msgs := make([]kafka.Message, n)
				for j := range msgs {
					id, m := fmt.Sprintf("%s%04d", prefix, j), fmt.Sprintf("m-%d", j%merchants)
					if kind == "grants" {
						msgs[j] = grantMsg(id, m, 1)
					} else {
						msgs[j] = paymentMsg(id, m, 1)
					}
				}
				topic := g.topic
				if kind == "grants" {
					topic = g.grants
				}
				b.StartTimer()
				g.produceTo(ctx, topic, msgs)
				g.waitRows(ctx, prefix, n)
			}
		})
	}
}

// waitRows polls until n ledger rows have event ids starting with prefix.
func (g *rig) waitRows(ctx context.Context, prefix string, n int64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var rows int64
		if err := g.db.DB.WithContext(ctx).Raw("SELECT COUNT(*) FROM quota_ledger WHERE event_id LIKE ?", prefix+"%").Scan(&rows).Error; err != nil {
			g.t.Fatal(err)
		}
		if rows >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
