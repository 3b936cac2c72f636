package stepaside

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/idgen"
)

// heldClock is the real clock, except that while held it reads a fixed
// instant: a clock stepped back and kept there, as an NTP step followed by a
// stuck source.
type heldClock struct {
	mu   sync.Mutex
	held time.Time
}

func (c *heldClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held.IsZero() {
		return c.held
	}
	return time.Now()
}

func (c *heldClock) Sleep(d time.Duration) { idgen.SystemClock().Sleep(d) }

func (c *heldClock) hold(t time.Time) {
	c.mu.Lock()
	c.held = t
	c.mu.Unlock()
}

// waitFor fails the test if ch does not close within a minute (a liveness
// bound, not a timing assertion).
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not happen", what)
	}
}

// A generator whose clock steps back 50ms and stays there: the monitor
// steps aside after the bound, ends the member contexts, reports it, and
// admits again once the clock is back.
func TestMonitorStepsAsideAndRejoins(t *testing.T) {
	clock := &heldClock{}
	gen, err := idgen.New(5, idgen.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(gen.Check, 100*time.Millisecond, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = m.Run(ctx)
	}()

	member, release, err := m.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := m.Ready(ctx); err != nil {
		t.Fatalf("Ready before any refusal: %v", err)
	}
	id, err := gen.NextID()
	if err != nil {
		t.Fatal(err)
	}
	issuedAt := time.UnixMilli(idgen.EpochUnixMilli + int64(id)>>(idgen.SequenceBits+idgen.WorkerBits))
	clock.hold(issuedAt.Add(-50 * time.Millisecond))
	if _, err := gen.NextID(); !errors.Is(err, idgen.ErrClockBackward) {
		t.Fatalf("NextID with the clock back: %v", err)
	}
	waitFor(t, member.Done(), "step aside")
	if err := m.Ready(ctx); !errors.Is(err, ErrSteppedAside) || !errors.Is(err, idgen.ErrClockBackward) {
		t.Fatalf("Ready aside = %v", err)
	}

	admitted := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, rel, err := m.Admit(ctx); err == nil {
			rel()
			close(admitted)
		}
	}()
	select {
	case <-admitted:
		t.Fatal("admitted while the generator refuses")
	case <-time.After(300 * time.Millisecond):
	}
	clock.hold(time.Time{})
	waitFor(t, admitted, "rejoin")
	if err := m.Ready(ctx); err != nil {
		t.Fatalf("Ready after the rejoin: %v", err)
	}
	if _, err := gen.NextID(); err != nil {
		t.Fatalf("NextID after the rejoin: %v", err)
	}
}

// While runs its part, stops it at a step aside and runs it again after the rejoin.
func TestWhileStopsAndRestartsThePart(t *testing.T) {
	var refusing atomic.Bool
	check := func() error {
		if refusing.Load() {
			return idgen.ErrLeaseNotValid
		}
		return nil
	}
	m, err := New(check, 20*time.Millisecond, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan struct{}, 3)
	stopped := make(chan struct{}, 3)
	done := make(chan error, 2)
	go func() { done <- m.Run(ctx) }()
	go func() {
		done <- m.While(ctx, func(ctx context.Context) error {
			runs <- struct{}{}
			<-ctx.Done()
			stopped <- struct{}{}
			return nil
		})
	}()
	waitFor(t, chanOf(runs), "first run")
	refusing.Store(true)
	waitFor(t, chanOf(stopped), "the part stopped at the step aside")
	refusing.Store(false)
	waitFor(t, chanOf(runs), "second run after the rejoin")
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// chanOf turns one receive from ch into a closed channel for waitFor.
func chanOf(ch <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		<-ch
		close(out)
	}()
	return out
}

func TestNewValidates(t *testing.T) {
	log := zaptest.NewLogger(t)
	for name, f := range map[string]func() error{
		"nil check":  func() error { _, err := New(nil, time.Second, log, nil); return err },
		"zero bound": func() error { _, err := New(func() error { return nil }, 0, log, nil); return err },
		"nil logger": func() error { _, err := New(func() error { return nil }, time.Second, nil, nil); return err },
	} {
		if f() == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
