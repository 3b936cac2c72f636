package worker

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// Redis dies (its data with it) while events flow, stays down for a while and
// comes back empty: nothing is dead-lettered, /readyz says why it is not ready,
// and once Redis is back every event is applied exactly once, the balances
// rebuilt from MySQL.
func TestWorkerSurvivesRedisOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 3)
	redisSrv := testenv.StartRedisServer(t)
	g.env["REDIS_ADDR"] = redisSrv.Addr()
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 11, Merchants: 20, MinAmount: 1, MaxAmount: 5, Duplicates: 0.05, IDPrefix: "outage-"}, 1500, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := g.start(4, Options{})
	grantAll(t, w.Worker, traffic.Merchants(), 10_000)
	g.produce(ctx, traffic.Messages[:500])
	g.drain(ctx)

	redisSrv.Kill()
	g.produce(ctx, traffic.Messages[500:])
	// While Redis is down the worker is not ready and names Redis.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + w.HTTPAddr.String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "redis") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz during the outage: %d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // longer than a few retry rounds: still nothing may reach the DLQ
	if recs := g.dlqRecords(ctx); len(recs) != 0 {
		t.Fatalf("the outage dead-lettered %d messages, first: %s %s", len(recs), recs[0].Class, recs[0].Message)
	}
	redisSrv.Start()
	g.drain(ctx)

	rep := g.check(ctx, w.Worker, traffic.Produced, g.dlqRecords(ctx))
	t.Logf("\n%s", rep)
	if !rep.OK() {
		t.Fatal("invariants broken after the outage")
	}
}
