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

// refusal is a check whose refusal the test sets (nil: it issues).
type refusal struct{ err atomic.Pointer[error] }

func (r *refusal) set(err error) { r.err.Store(&err) }

func (r *refusal) check() error {
	if p := r.err.Load(); p != nil {
		return *p
	}
	return nil
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

// A generator that refuses (its clock 50ms back) past the bound: the
// monitor ends the member contexts, reports it, keeps probing, and admits
// again once it issues.
func TestMonitorStepsAsideAndRejoins(t *testing.T) {
	var r refusal
	m, err := New(r.check, 100*time.Millisecond, zaptest.NewLogger(t), nil)
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
	r.set(&idgen.ClockBackwardError{By: 50 * time.Millisecond})
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
	r.set(nil)
	waitFor(t, admitted, "rejoin")
	if err := m.Ready(ctx); err != nil {
		t.Fatalf("Ready after the rejoin: %v", err)
	}
}

// While runs its part, stops it at a step aside and runs it again after the rejoin.
func TestWhileStopsAndRestartsThePart(t *testing.T) {
	var r refusal
	m, err := New(r.check, 20*time.Millisecond, zaptest.NewLogger(t), nil)
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
	r.set(idgen.ErrLeaseNotValid)
	waitFor(t, chanOf(stopped), "the part stopped at the step aside")
	r.set(nil)
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
