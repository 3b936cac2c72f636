// Package shard splits a hot merchant's quota into shards: which shard an
// event belongs to, the Redis hash tag of each shard, how available quota is
// split among them, and the shard counts kept in MySQL (merchant_shards).
//
// A merchant has one shard unless merchant_shards says otherwise; its keys are
// then today's quota:{m} and lock:quota:{m}. With n > 1 shards, shard s is
// quota:{m#s} and lock:quota:{m#s}: a hash tag per shard, so the shards of one
// merchant spread over the nodes of a Redis Cluster ('#' never occurs in a
// merchant id, so a tag names one merchant and shard unambiguously).
package shard

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Max is the largest shard count of a merchant.
const Max = 64

// Of is the shard of an event among n: FNV-1a of its event_id modulo n. It
// must never change: a pending deduction lives in its event's shard, and a
// redelivered event finds it there.
func Of(eventID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(eventID); i++ {
		h ^= uint32(eventID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// Tag is the hash tag of shard s of n of a merchant: the merchant id when n is
// 1, else "m#s".
func Tag(merchantID string, s, n int) string {
	if n <= 1 {
		return merchantID
	}
	return merchantID + "#" + strconv.Itoa(s)
}

// Tags lists the tags of a layout of n shards, in shard order.
func Tags(merchantID string, n int) []string {
	tags := make([]string, max(n, 1))
	for s := range tags {
		tags[s] = Tag(merchantID, s, n)
	}
	return tags
}

// Merchant is the merchant id of a tag.
func Merchant(tag string) string {
	m, _, _ := strings.Cut(tag, "#")
	return m
}

// Split divides total among n shards as evenly as it goes, the remainder to
// the first shards, so that the parts always sum to total.
func Split(total int64, n int) []int64 {
	n = max(n, 1)
	parts := make([]int64, n)
	if total <= 0 {
		return parts
	}
	each, rest := total/int64(n), total%int64(n)
	for s := range parts {
		parts[s] = each
		if int64(s) < rest {
			parts[s]++
		}
	}
	return parts
}

// Cache holds the shard counts of sharded merchants for routing, refreshed
// from MySQL. A stale count only routes an event to a lane or shard of the
// previous layout for a moment: a shard refuses a deduction routed by another
// count than its layout's, and the write path checks the layout in MySQL
// before it creates or rebalances shards, so no decision rests on it. The Store's methods read and write MySQL directly.
// Run rereads only while counts are asked for: an idle worker reads nothing.
type Cache struct {
	*Store
	every  time.Duration
	log    *zap.Logger
	counts atomic.Pointer[map[string]int]
	used   atomic.Bool // Count was called since the last tick
}

// NewCache returns a Cache that Run refreshes every interval (default 1s)
// in which it was used.
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
	if !c.used.Load() { // a load, not a store, per event: the flag's cache line stays shared
		c.used.Store(true)
	}
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

// Run refreshes the counts every interval in which Count was called, until
// ctx ends; a failed read keeps the last ones. After an idle spell the first
// events route by the counts read before it, for at most an interval: as
// after any resharding, nothing is decided by them.
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
		if !c.used.Swap(false) {
			continue
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
