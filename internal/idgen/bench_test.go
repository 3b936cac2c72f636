package idgen

import (
	"runtime"
	"testing"
)

// The cap is 4096 IDs per millisecond (4.096 M/s) per worker; these report
// ids/s so the fraction of it reached is visible.

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

func BenchmarkNextID(b *testing.B) {
	g, err := New(1, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

func BenchmarkNextIDParallel(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, bc := range []struct {
		name        string
		parallelism int
	}{
		{"gomaxprocs", 1},
		{"goroutines=64", (64 + procs - 1) / procs},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := New(1, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(bc.parallelism)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.NextID(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRate(b)
		})
	}
}

// BenchmarkNextIDs fills batches of 500 (a ledger batch insert); ns/op and
// ids/s are per ID.
func BenchmarkNextIDs(b *testing.B) {
	g, err := New(1, Options{})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]ID, 500)
	b.ReportAllocs()
	for i := 0; i < b.N; i += len(dst) {
		if err := g.NextIDs(dst[:min(len(dst), b.N-i)]); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}
