package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Uncontended Wait + Release of a batch's keys: two round trips whatever the
// number of keys (obtain script, release script), and the watchdog's start
// and stop.
func BenchmarkObtainRelease(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			r, c, _ := setup(b)
			ctx := context.Background()
			keys := make([]string, n)
			for i := range keys {
				keys[i] = r.Keys.Lock(fmt.Sprintf("m-%d", i))
			}
			start := time.Now()
			for b.Loop() {
				l, err := c.Wait(ctx, keys, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "locks/s")
		})
	}
}
