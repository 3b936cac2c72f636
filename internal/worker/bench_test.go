package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
)

// BenchmarkTopic1000 times 1,000 messages waiting in a topic through a
// worker, from its start (group join included) until the last message's
// ledger row is in MySQL: payment events (deductions) against grant commands
// (credits), over the same 50 merchants. One op is 1,000 messages; the
// messages are produced, and the worker built, before the timer runs.
//
//	go test -run '^$' -bench Topic1000 -benchtime 10x ./internal/worker/
func BenchmarkTopic1000(b *testing.B) {
	const n, merchants = 1000, 50
	g := newRig(b, 4)
	ctx := context.Background()
	seed := make([]event.GrantCommand, merchants)
	for m := range seed {
		seed[m] = event.GrantCommand{GrantID: fmt.Sprintf("seed-%d", m), MerchantID: fmt.Sprintf("m-%d", m), Amount: 1 << 40}
	}
	first := g.start(1, Options{NoHTTP: true})
	if _, err := first.path.Deductor.GrantBatch(ctx, seed); err != nil {
		b.Fatal(err)
	}
	first.stop(b)
	round := 0 // ids stay new across b.N rounds and -count runs
	for _, kind := range []string{"payments", "grants"} {
		b.Run(kind, func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				round++
				prefix := fmt.Sprintf("%s-%d-", kind, round)
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
				g.produceTo(ctx, topic, msgs)
				w, err := New(ctx, g.config(1), zap.NewNop(), Options{NoHTTP: true})
				if err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				b.StartTimer()
				go func() { done <- w.Run(wctx) }()
				g.waitRows(ctx, prefix, n)
				b.StopTimer()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
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
