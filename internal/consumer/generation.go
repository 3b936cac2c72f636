package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// generation is one group generation's work: a reader and window per
// partition, the lanes and the committer. What it did not commit is dropped.
type generation[T any] struct {
	c     *Consumer[T]
	kg    *kafka.Generation
	log   *zap.Logger
	parts []*partition
	lanes []*lane[T]

	commitNow chan struct{} // asks the committer for a commit before its next tick

	stop, work context.Context // stop: fetch, batching, waits; work: handler and DLQ calls, a drain later
}

// generation runs kg until it is revoked or member ends, inside kg.Start so
// that kafka-go waits for the final commit before joining again. When member
// ended (on shutdown, ctx ended too) it closes the group after that commit,
// to leave, not rejoin.
func (c *Consumer[T]) generation(ctx, member, genCtx context.Context, kg *kafka.Generation, closeGroup func()) {
	stopCtx, stop := context.WithCancel(context.Background())
	workCtx, abandon := context.WithCancel(context.Background())
	defer abandon()
	defer stop()
	g := &generation[T]{c: c, kg: kg, stop: stopCtx, work: workCtx,
		commitNow: make(chan struct{}, 1), log: c.log.With(zap.Int32("generation", kg.ID))}
	var ids []int
	for _, a := range kg.Assignments[c.cfg.Topic] {
		g.parts = append(g.parts, newPartition(c.cfg, a, c.m, c.log))
		ids = append(ids, a.ID)
	}
	for i := 0; i < c.cfg.Lanes; i++ {
		g.lanes = append(g.lanes, newLane[T](i, c.cfg))
	}
	g.log.Info("generation started", zap.Ints("partitions", ids))

	var workers, committer sync.WaitGroup
	c.goAll(&workers, g.checkDLQTopic)
	for _, p := range g.parts {
		c.goAll(&workers, func() { g.fetch(p) })
	}
	for _, l := range g.lanes {
		c.goAll(&workers, func() { g.runLane(l) })
	}
	c.goAll(&committer, g.commitLoop)

	select {
	case <-member.Done():
	case <-genCtx.Done():
	}
	shutdown, leaving := ctx.Err() != nil, member.Err() != nil
	if shutdown {
		c.stopping() // the shutdown bound starts now
	}
	began := time.Now()
	stop()
	g.closeReaders()
	drain, grace := c.cfg.drainBudget(shutdown)
	if !waitGroupFor(&workers, drain) {
		abandon()
		if !waitGroupFor(&workers, grace) {
			g.log.Error("handler calls ignore cancellation; abandoned, their offsets not committed")
		}
	}
	committer.Wait()
	g.commit(true)
	for _, p := range g.parts {
		c.m.forget(p.id)
	}
	g.log.Info("generation ended", zap.Bool("shutdown", shutdown), zap.Bool("leaving", leaving), zap.Duration("drain", time.Since(began)))
	if leaving {
		// Leave the group before returning: once this returns kafka-go
		// would start joining a next generation.
		closeGroup()
		waitUntil(genCtx.Done(), c.leaveBy(ctx))
	}
}

// closeReaders stops the partition readers at once (each may wait MaxWait).
func (g *generation[T]) closeReaders() {
	var wg sync.WaitGroup
	for _, p := range g.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.reader.Close(); err != nil {
				g.log.Warn("close partition reader", zap.Int("partition", p.id), zap.Error(err))
			}
		}()
	}
	wg.Wait()
}

// commitLoop commits every CommitInterval and on commitSoon until stop.
func (g *generation[T]) commitLoop() {
	t := time.NewTicker(g.c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-g.stop.Done():
			return
		case <-t.C:
			g.commit(false)
		case <-g.commitNow:
			g.commit(false)
		}
	}
}

// commitSoon asks for a commit before the next tick; requests merge.
func (g *generation[T]) commitSoon() {
	select {
	case g.commitNow <- struct{}{}:
	default:
	}
}

// commit commits the positions that moved through the generation (refused
// once it is over: a revoked partition is never moved) and sets the gauges.
func (g *generation[T]) commit(final bool) {
	offsets := make(map[int]int64)
	for _, p := range g.parts {
		pos, ok, n := p.position()
		p.metrics.inflight.Set(float64(n))
		if ok && pos > p.committed {
			offsets[p.id] = pos
		}
	}
	if len(offsets) > 0 {
		if err := g.kg.CommitOffsets(map[string]map[int]int64{g.c.cfg.Topic: offsets}); err != nil {
			g.c.m.commits.WithLabelValues("error").Inc()
			g.log.Warn("commit offsets", zap.Bool("final", final), zap.Any("offsets", offsets), zap.Error(err))
		} else {
			g.c.m.commits.WithLabelValues("ok").Inc()
			for _, p := range g.parts {
				if pos, ok := offsets[p.id]; ok {
					p.committed = pos
				}
			}
			if final {
				g.log.Info("committed offsets", zap.Any("offsets", offsets))
			}
		}
	}
	for _, p := range g.parts {
		p.updateLag()
	}
}

// waitGroupFor waits for wg up to d and reports whether it finished.
func waitGroupFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return waitUntil(done, time.Now().Add(d))
}
