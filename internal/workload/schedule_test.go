package workload

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
)

// clockWriter records when each message was handed over.
type clockWriter struct {
	mu      sync.Mutex
	at      []time.Time // per message
	values  [][]byte
	times   []time.Time // record timestamps
	stallAt int         // the call that sleeps stall
	stall   time.Duration
	calls   int
}

func (w *clockWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.calls == w.stallAt {
		time.Sleep(w.stall)
	}
	now := time.Now()
	for _, m := range msgs {
		w.at = append(w.at, now)
		w.values = append(w.values, m.Value)
		w.times = append(w.times, m.Time)
	}
	return nil
}

func scheduled(t *testing.T, rate float64) *Generator {
	t.Helper()
	g, err := New(Config{Seed: 1, Merchants: 10, Start: time.Now().Add(20 * time.Millisecond), Step: time.Duration(float64(time.Second) / rate)})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The schedule is absolute: nothing leaves before its occurred_at, the
// whole takes about N/R (never much less), and occurred_at is the schedule.
func TestProduceOnScheduleNoDrift(t *testing.T) {
	const n, rate = 400, 2000.0
	g := scheduled(t, rate)
	start, step := g.Config().Start, g.Config().Step
	var w clockWriter
	st, err := ProduceOnSchedule(context.Background(), Writers{Payments: &w}, g, n, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.at) != n || st.Summary.Messages != n {
		t.Fatalf("handed over %d, counted %d, want %d", len(w.at), st.Summary.Messages, n)
	}
	for k, at := range w.at {
		e, err := event.Decode(nil, w.values[k])
		if err != nil {
			t.Fatal(err)
		}
		due := start.Add(step * time.Duration(k))
		if !e.OccurredAt.Equal(due) {
			t.Fatalf("message %d: occurred_at %v, due %v", k, e.OccurredAt, due)
		}
		if !w.times[k].Equal(due) {
			t.Fatalf("message %d: record timestamp %v, due %v", k, w.times[k], due)
		}
		if at.Before(due) {
			t.Fatalf("message %d handed over %v before it was due", k, due.Sub(at))
		}
	}
	want := time.Duration(n-1) * step // the last one is due then
	if got := w.at[n-1].Sub(start); got < want || got > want+time.Second {
		t.Fatalf("%d messages at %v/s took %v from the start, want %v (+ at most 1s)", n, rate, got, want)
	}
}

// A writer that stalls makes the producer late, not the schedule longer: the
// backlog leaves at once, and the lag is reported.
func TestProduceOnScheduleCatchesUp(t *testing.T) {
	const n, rate = 400, 2000.0
	const stall = 100 * time.Millisecond
	g := scheduled(t, rate)
	start, step := g.Config().Start, g.Config().Step
	w := clockWriter{stallAt: 2, stall: stall}
	st, err := ProduceOnSchedule(context.Background(), Writers{Payments: &w}, g, n, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxLag < stall-10*time.Millisecond {
		t.Fatalf("MaxLag %v after a stall of %v", st.MaxLag, stall)
	}
	want := time.Duration(n-1) * step
	if got := w.at[n-1].Sub(start); got < want || got > want+time.Second {
		t.Fatalf("with a stall, the last message left %v after the start, want about %v", got, want)
	}
}

func TestProduceOnScheduleUnpacedAndCancel(t *testing.T) {
	g, err := New(Config{Seed: 1, Start: time.Now().Add(time.Hour), Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var w clockWriter
	// Unpaced: all at once, whatever occurred_at says.
	if _, err := ProduceOnSchedule(context.Background(), Writers{Payments: &w}, g, 2500, true, nil); err != nil || len(w.at) != 2500 {
		t.Fatalf("unpaced: %d handed over, err %v", len(w.at), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Paced an hour ahead: nothing is due, the context ends the wait.
	if _, err := ProduceOnSchedule(ctx, Writers{Payments: &w}, g, 10, false, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}
