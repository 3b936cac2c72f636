package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	gate, err := stepaside.New(func() error {
		if refusing.Load() {
			return testOutage{}
		}
		return nil
	}, 50*time.Millisecond, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	gateCtx, stopGate := context.WithCancel(context.Background())
	var gateRun sync.WaitGroup
	gateRun.Add(1)
	go func() {
		defer gateRun.Done()
		_ = gate.Run(gateCtx)
	}()
	defer gateRun.Wait()
	defer stopGate()
	acfg := cfg
	acfg.Gate = gate
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
