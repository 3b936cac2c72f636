package shard

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Cache holds the shard counts of sharded merchants for routing, refreshed
// from MySQL. A stale count only routes an event to a lane or shard of the
// previous layout for a moment: a shard refuses a deduction routed by another
// count than its layout's, and the write path checks the layout in MySQL
// before it creates or rebalances shards, so no decision rests on it. The Store's methods read and write MySQL directly.
type Cache struct {
	*Store
	every  time.Duration
	log    *zap.Logger
	counts atomic.Pointer[map[string]int]
}

// NewCache returns a Cache that Run refreshes every interval (default 1s).
func NewCache(store *Store, every time.Duration, log *zap.Logger) *Cache {
	if every <= 0 {
		every = time.Second
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cache{Store: store, every: every, log: log}
	c.counts.Store(&map[string]int{})
	return c
}

// Count is the merchant's shard count as last read (1 when not sharded).
func (c *Cache) Count(merchantID string) int {
	if n, ok := (*c.counts.Load())[merchantID]; ok {
		return n
	}
	return 1
}

// Refresh reads the counts now.
func (c *Cache) Refresh(ctx context.Context) error {
	m, err := c.Sharded(ctx)
	if err != nil {
		return err
	}
	c.counts.Store(&m)
	return nil
}

// Run refreshes the counts until ctx ends; a failed read keeps the last ones.
func (c *Cache) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := c.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			c.log.Warn("shard counts not refreshed, routing by the last ones", zap.Error(err))
			failing = true
		case err == nil && failing:
			c.log.Info("shard counts refreshed again")
			failing = false
		}
	}
}
