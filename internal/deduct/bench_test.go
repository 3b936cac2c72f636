package deduct

import (
	"context"
	"fmt"
	"testing"

	"github.com/quotaflow/billing/internal/event"
)

// BenchmarkApply measures the write path against the real Redis and MariaDB:
// batches of 1, 100 and 1,000 new events spread over up to 8 merchants
// (warm hashes), one batch after another, locks included.
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 5s ./internal/deduct/
func BenchmarkApply(b *testing.B) {
	for _, size := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			e := newEnv(b)
			merchants := make([]string, min(size, 8))
			for i := range merchants {
				merchants[i] = fmt.Sprintf("m-%d", i)
				e.grant(merchants[i], 1<<50)
			}
			next := 0
			batch := func() []event.PaymentSucceeded {
				out := make([]event.PaymentSucceeded, size)
				for i := range out {
					out[i] = pay(fmt.Sprintf("b-%d", next), merchants[i%len(merchants)], 1)
					next++
				}
				return out
			}
			e.apply(e.d, batch()) // hydrate the hashes
			ctx := context.Background()
			batches := 0
			for b.Loop() {
				b.StopTimer()
				evs := batch()
				b.StartTimer()
				if _, err := e.d.Apply(ctx, evs); err != nil {
					b.Fatal(err)
				}
				batches++
			}
			b.ReportMetric(float64(batches*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
