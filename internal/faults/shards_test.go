package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// hotLoad is mixedLoad with one merchant (workload.MerchantIDs(1)[0]) taking
// most of the traffic, more than it was granted: it runs dry, so its shards
// rebalance and, at the end, reject.
func hotLoad(prefix string) workload.Config {
	cfg := mixedLoad(prefix)
	cfg.Skew = workload.Skew{Kind: workload.Hot, Param: 0.6}
	return cfg
}

// reshardWhile changes the hot merchant's shard count to each of counts in
// turn while the load runs, once a further share of it was produced. The load
// is a held one (startHeldLoad): its last chunk waits for the last reshard,
// so a reshard slowed by a busy machine still runs under load.
func (g *rig) reshardWhile(ctx context.Context, l *load, hot string, counts ...int) {
	g.t.Helper()
	total := int64(len(l.msgs))
	for k, n := range counts {
		due := total * int64(k+1) / int64(len(counts)+1)
		// ctx bounds the wait: a load too short to reach due before its held
		// last chunk would otherwise spin here until the test binary's timeout.
		for l.sent.Load() < due && l.running() && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		lay, err := g.granter.Reshard(ctx, hot, n)
		if err != nil {
			g.t.Fatalf("reshard %s to %d: %v", hot, n, err)
		}
		// A reshard after the load proves nothing about resharding under it.
		if !l.running() {
			g.t.Fatalf("the load ended before the reshard of %s to %d was done (%d of %d messages sent)", hot, n, l.sent.Load(), total)
		}
		g.t.Logf("resharded %s to %d (folded from %d) after %d of %d messages", hot, n, lay.FoldingFrom, l.sent.Load(), total)
	}
	l.release()
}

// Resharding the hot merchant 1 -> 8 -> 3 while two workers consume: every
// invariant holds (each valid event one ledger row, balances equal their
// ledgers, nothing overdrawn, Redis equal to MySQL summed over the shards,
// every invalid message dead-lettered), the reconciler finds no drift, and
// nothing of the one-shard or eight-shard layout is left in Redis.
func TestReshardUnderLoad(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	seed := p.seed()
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	tr := traffic(t, seed, hotLoad("reshard-"), size(3000, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	hot := workload.MerchantIDs(1)[0]
	members := []*member{g.startMember(1, nil), g.startMember(2, nil)}
	l := g.startHeldLoad(ctx, tr.Messages, size(500, 1000))
	g.reshardWhile(ctx, l, hot, 8, 3)
	if err := l.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 2*time.Minute)
	for _, m := range members {
		m.Stop()
	}
	_, rec := g.settle(ctx, newTruth(tr).produced)
	for _, f := range rec.Findings {
		if drifted(f) {
			t.Errorf("the reconciler found drift after the resharding: %+v", f)
		}
	}
	for _, tag := range (shard.Layout{Shards: 3, FoldingFrom: 8}).Tags(hot)[3:] {
		if g.rdb.Exists(ctx, g.keys.Quota(tag)).Val() != 0 {
			t.Errorf("%s of the eight-shard layout is still in Redis", tag)
		}
	}
	if g.rdb.Exists(ctx, g.keys.Quota(hot)).Val() != 0 {
		t.Errorf("quota of the one-shard layout of %s is still in Redis", hot)
	}
}

// A merchant with 8 shards on a three-master Redis Cluster: its shards land
// on more than one master, and no script crosses slots (each touches one
// shard's hash and lock, both tagged {m#s}), while two workers consume and a
// resharding folds under load; the invariants hold.
func TestShardsOnRedisCluster(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	seed := p.seed()
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 15*time.Minute))
	defer cancel()
	addrs := testenv.StartRedisCluster(t)
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: addrs})
	cc, ok := g.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("rig client for %v is a %T, not a cluster client", addrs, g.rdb)
	}
	tr := traffic(t, seed, hotLoad("cshard-"), size(2000, 20000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	hot := workload.MerchantIDs(1)[0]
	if _, err := g.granter.Reshard(ctx, hot, 8); err != nil {
		t.Fatal(err)
	}
	members := []*member{g.startMember(1, nil), g.startMember(2, nil)}
	l := g.startHeldLoad(ctx, tr.Messages, size(400, 1000))
	g.reshardWhile(ctx, l, hot, 5)
	if err := l.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 2*time.Minute)
	for _, m := range members {
		m.Stop()
	}
	// The layout of 5 holds whatever quota is left: put it on every shard so
	// that each exists to be located (a drained shard still exists).
	masters := map[string]bool{}
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		for _, tag := range shard.Tags(hot, 5) {
			n, err := c.Exists(ctx, g.keys.Quota(tag)).Result()
			if err != nil && !strings.HasPrefix(err.Error(), "MOVED") {
				return err
			}
			if n == 1 {
				mu.Lock()
				masters[c.Options().Addr] = true
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the shards of %s are on masters %v", hot, masters)
	if len(masters) < 2 {
		t.Errorf("the 5 shards of %s are on %d master(s), want them spread", hot, len(masters))
	}
	for _, m := range members {
		if strings.Contains(m.Logs(), "CROSSSLOT") {
			t.Errorf("%s logged a CROSSSLOT error:\n%s", m.name, lastLines(m.Logs(), 30))
		}
	}
	_, rec := g.settle(ctx, newTruth(tr).produced)
	if strings.Contains(rec.Error, "CROSSSLOT") {
		t.Errorf("reconciler: %s", rec.Error)
	}
	var drift []reconcile.Finding
	for _, f := range rec.Findings {
		if drifted(f) {
			drift = append(drift, f)
		}
	}
	if len(drift) > 0 {
		t.Errorf("drift on the cluster: %+v", drift)
	}
}

// drifted: a finding of Redis disagreeing with MySQL (a missing hash is not).
func drifted(f reconcile.Finding) bool {
	return f.Kind == reconcile.KindRedisHigh || f.Kind == reconcile.KindRedisLow || f.Kind == reconcile.KindOrphanPending
}
