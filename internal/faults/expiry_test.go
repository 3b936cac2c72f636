package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/testenv"
)

// Merchants hold, besides a never-expiring grant, short grants of priority 1
// (some with a rollover) that expire one after another while the load runs,
// the workers are killed and restarted and their redis-server is restarted
// empty. Expiries land mid-batch (MySQL's guard), from the workers' expiry
// loop, and around the kills and the lost Redis: every grant still expires
// once, through one expire row of what it had left, its units are all
// remaining, paid or expired, the grants back every balance, and nothing is
// lost or applied twice.
func TestExpiryDuringKillsAndRedisLoss(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 15*time.Minute))
	defer cancel()
	srv := testenv.StartRedisServer(t)
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: []string{srv.Addr()}})
	p.use(g)
	tr := traffic(t, p.seed(), mixedLoad("expiry-"), size(3500, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	// 14s of load in CI: the short grants expire from 1s to 12s in.
	merchants := tr.Merchants()
	short := merchants[:max(1, len(merchants)-3)]
	start := time.Now()
	var grants []event.GrantCommand
	for i, m := range short {
		exp := start.Add(time.Second + time.Duration(i)*11*time.Second/time.Duration(len(short)))
		prio := 1
		c := event.GrantCommand{GrantID: "short-" + m, MerchantID: m, Amount: 300, Source: "faults", Priority: &prio, ExpiresAt: &exp}
		if i%3 == 0 {
			c.RolloverMax = 50
		}
		grants = append(grants, c)
	}
	res, err := g.granter.GrantBatch(ctx, grants)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("grant %s: %v", grants[i].GrantID, r.Err)
		}
	}
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := p.startLoad(ctx, tr.Messages, size(250, 500))

	faults := size(4, 12)
	for i := range faults {
		p.await(ctx, between(p.rng, time.Second, 2500*time.Millisecond))
		if i%2 == 0 {
			p.killOne(ctx, procs)
			continue
		}
		down := between(p.rng, 200*time.Millisecond, 1500*time.Millisecond)
		p.fired(ctx, "redis lost", "", fmt.Sprintf("%d keys, down %v", g.rdb.DBSize(ctx).Val(), down.Round(time.Millisecond)))
		srv.Kill()
		time.Sleep(down)
		srv.Start()
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("kill", (faults+1)/2)
	p.expect("redis lost", faults/2)
	g.drain(ctx, 90*time.Second)
	// The workers' loop records what the payments did not.
	var due int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := g.db.DB.Raw("SELECT COUNT(*) FROM quota_grants WHERE state = 'active' AND expires_at <= NOW(6)").Scan(&due).Error; err != nil {
			t.Fatal(err)
		}
		if due == 0 || time.Now().After(deadline) {
			break
		}
	}
	if due != 0 {
		t.Errorf("%d grants past their expiry still active after the drain", due)
	}
	for _, p := range procs {
		p.Stop()
	}
	var expired, rows, rolled int64
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_grants WHERE grant_id LIKE 'short-%' AND state = 'expired'").Scan(&expired)
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE kind = 'expire' AND event_id LIKE 'expire:short-%'").Scan(&rows)
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_grants WHERE grant_id LIKE 'rollover:short-%'").Scan(&rolled)
	t.Logf("short grants: %d of %d expired (wholly used ones end as used), %d expire rows, %d rollovers",
		expired, len(short), rows, rolled)
	if expired == 0 || rows == 0 || rows > expired {
		t.Errorf("%d short grants expired with %d expire rows", expired, rows)
	}
	g.settle(ctx, newTruth(tr).produced)
}
