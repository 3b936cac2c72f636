package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quotaflow/billing/internal/stepaside"
)

type testOutage struct{}

func (testOutage) Error() string { return "test: dependency refuses" }
func (testOutage) Outage() bool  { return true }

// A member whose handler meets an outage, and whose gate (the worker's
// step-aside monitor) then closes, leaves the group: what it held is not
// committed, the other member handles it and everything after, and once the
// gate opens the member rejoins.
func TestGateLeavesAndRejoins(t *testing.T) {
	c := newCluster(t)
	const parts, n = 4, 4000
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, 40)
	c.produce(t, topic, msgs[:n/2])
	first, _ := c.offsets(t, topic, parts)

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	cfg.BatchSize = 8
	var refusing atomic.Bool
	var aHandled atomic.Int64
	h := rec.handler(2 * time.Millisecond)
	acfg := cfg
	acfg.Gate = runGate(t, &refusing)
	a := start(t, acfg, handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		if refusing.Load() {
			return nil, testOutage{}
		}
		errs, err := h(ctx, items)
		aHandled.Add(int64(len(items)))
		return errs, err
	}), nil)
	waitFor(t, 10*time.Second, "the gated member handling", func() bool { return aHandled.Load() >= 100 })
	var bHandled atomic.Int64
	start(t, cfg, handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		errs, err := h(ctx, items)
		bHandled.Add(int64(len(items)))
		return errs, err
	}), nil)
	waitFor(t, 10*time.Second, "the other member handling", func() bool { return bHandled.Load() >= 100 })
	if rec.distinct() >= n/2 {
		t.Fatal("the first half was handled before both members took part; slow the handler down")
	}

	refusing.Store(true)
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the gated member out of the group", func() bool { return errors.Is(a.c.Ready(ctx), ErrLeft) })
	byA := aHandled.Load()
	gens := value(t, a.m.generations)
	c.produce(t, topic, msgs[n/2:])
	waitFor(t, 20*time.Second, "all handled by the other member", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	if got := aHandled.Load(); got != byA {
		t.Fatalf("the member out of the group handled %d items", got-byA)
	}
	if err := rec.unhandledBelow(c.committed(t, cfg.Group, topic, parts), first); err != nil {
		t.Fatal(err)
	}
	rec.checkOrder(t, perKey)

	refusing.Store(false)
	waitFor(t, 20*time.Second, "the member back in the group", func() bool {
		return value(t, a.m.generations) > gens && a.c.Ready(ctx) == nil
	})
}

// runGate runs a step-aside monitor that refuses while refusing is set,
// stepping aside after 50ms of it, until the test ends.
func runGate(t *testing.T, refusing *atomic.Bool) *stepaside.Monitor {
	t.Helper()
	gate, err := stepaside.New(func() error {
		if refusing.Load() {
			return testOutage{}
		}
		return nil
	}, 50*time.Millisecond, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = gate.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return gate
}

// Admitted again, the consumer reports that it is joining, not that it is
// still out of the group waiting for its gate, until it has an assignment.
func TestGateRejoinReportsJoining(t *testing.T) {
	c := newCluster(t)
	kf := c.k.FaultHooks(t)
	topic, dlqTopic := c.k.Topic(t, 2), c.k.Topic(t, 1)
	cfg := c.config(topic, dlqTopic)
	var refusing atomic.Bool
	cfg.Gate = runGate(t, &refusing)
	a := start(t, cfg, newRecorder().handler(0), nil)
	ctx := context.Background()
	waitFor(t, 10*time.Second, "joined", func() bool { return a.c.Ready(ctx) == nil })
	refusing.Store(true)
	waitFor(t, 10*time.Second, "out of the group", func() bool { return errors.Is(a.c.Ready(ctx), ErrLeft) })

	// Hold the rejoin's JoinGroup until the test has looked.
	var held atomic.Bool
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free)
	kf.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(false, true) {
			kf.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	refusing.Store(false)
	waitFor(t, 10*time.Second, "the rejoin's JoinGroup", held.Load)
	if err := a.c.Ready(ctx); !errors.Is(err, ErrJoining) {
		t.Errorf("Ready while rejoining = %v, want %v", err, ErrJoining)
	}
	free()
	waitFor(t, 10*time.Second, "joined again", func() bool { return a.c.Ready(ctx) == nil })
}
