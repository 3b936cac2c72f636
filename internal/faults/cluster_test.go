package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/testenv"
)

// The whole write path on a three-master Redis Cluster: two in-process
// workers with REDIS_ADDR naming the three nodes (the merchant lock, the Lua
// deduction and confirm, the worker-ID lease), the operator's grants, and a
// reconciler pass that repairs drift injected on merchants in different
// slots. No command may fail with CROSSSLOT, the merchants' keys must spread
// over the masters, and the invariants hold.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	addrs := testenv.StartRedisCluster(t)
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: addrs})
	p.use(g)
	cc, ok := g.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("rig client for %v is a %T, not a cluster client", addrs, g.rdb)
	}
	tr := traffic(t, p.seed(), mixedLoad("cluster-"), size(2000, 20000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	members := []*member{g.startMember(1, nil), g.startMember(2, nil)}
	load := g.startLoad(ctx, tr.Messages, size(300, 500))
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, time.Minute)
	for _, id := range []int{1, 2} {
		if n := g.rdb.Exists(ctx, g.keys.WorkerLease(id)).Val(); n != 1 {
			t.Errorf("worker-ID lease %d not in the cluster", id)
		}
	}
	perMaster := map[string]int{}
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n := 0
		iter := c.Scan(ctx, 0, g.keys.QuotaPattern(), 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		mu.Lock()
		perMaster[c.Options().Addr] = n
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quota hashes per master: %v", perMaster)
	spread := 0
	for _, n := range perMaster {
		if n > 0 {
			spread++
		}
	}
	if spread < 2 {
		t.Errorf("the merchants' keys are on %d master(s), want them spread", spread)
	}
	for _, m := range members {
		m.Stop()
	}

	// Drift the reconciler must repair, on merchants in different slots.
	merchants := tr.Merchants()
	p.rng.Shuffle(len(merchants), func(i, j int) { merchants[i], merchants[j] = merchants[j], merchants[i] })
	var drifted []string
	for _, m := range merchants {
		if g.rdb.Exists(ctx, g.keys.Quota(m)).Val() == 1 && len(drifted) < 4 {
			drifted = append(drifted, m)
		}
	}
	if len(drifted) < 4 {
		t.Fatalf("only %d merchants have a quota hash", len(drifted))
	}
	for i, drift := range []func() error{
		func() error { return g.rdb.HIncrBy(ctx, g.keys.Quota(drifted[0]), quota.FieldRemain, 7).Err() },  // redis high
		func() error { return g.rdb.HIncrBy(ctx, g.keys.Quota(drifted[1]), quota.FieldRemain, -4).Err() }, // redis low
		func() error { return g.rdb.Del(ctx, g.keys.Quota(drifted[2])).Err() },                            // missing
		func() error {
			return g.rdb.HSet(ctx, g.keys.Quota(drifted[3]), "p:ghost-event", quota.FormatPending(3, time.Now().Add(-time.Hour))).Err()
		},
	} {
		p.fired(ctx, "drift", "", drifted[i])
		if err := drift(); err != nil {
			t.Fatalf("drift %s: %v", drifted[i], err)
		}
	}
	p.expect("drift", 4)

	_, rec := g.settle(ctx, newTruth(tr).produced, drifted...)
	kinds := map[reconcile.Kind]bool{}
	for _, f := range rec.Findings {
		kinds[f.Kind] = true
	}
	for _, k := range []reconcile.Kind{reconcile.KindRedisHigh, reconcile.KindRedisLow, reconcile.KindMissingKey, reconcile.KindOrphanPending} {
		if !kinds[k] {
			t.Errorf("the reconciler pass did not report %s", k)
		}
	}
	for _, m := range members {
		if strings.Contains(m.Logs(), "CROSSSLOT") {
			t.Errorf("%s logged a CROSSSLOT error:\n%s", m.name, lastLines(m.Logs(), 30))
		}
	}
	if strings.Contains(rec.Error, "CROSSSLOT") {
		t.Errorf("reconciler: %s", rec.Error)
	}
}
