package lock

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name     string
		min, max time.Duration
		want     []time.Duration // the ceiling d of each step; a delay is in [d/2, d]
	}{
		{"doubles to the cap", 5 * ms, 50 * ms, []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 50 * ms, 50 * ms}},
		{"min equals max", 50 * ms, 50 * ms, []time.Duration{50 * ms, 50 * ms, 50 * ms}},
		{"cap below min", 50 * ms, 10 * ms, []time.Duration{10 * ms, 10 * ms}},
		{"zero", 0, 0, []time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 100 { // jitter is random: check the bounds many times
				b := backoff{min: tt.min, max: tt.max}
				for i, d := range tt.want {
					if got := b.delay(); got < d/2 || got > d {
						t.Fatalf("step %d: delay %v outside [%v, %v]", i, got, d/2, d)
					}
				}
				b.reset()
				if got := b.delay(); got < tt.want[0]/2 || got > tt.want[0] {
					t.Fatalf("after reset: delay %v outside [%v, %v]", got, tt.want[0]/2, tt.want[0])
				}
			}
		})
	}
}
