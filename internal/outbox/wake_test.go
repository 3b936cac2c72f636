package outbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/testenv"
)

// process is one worker of the rig's database: a ledger store whose commits
// wake the worker's relay, as the worker wires them.
type process struct {
	store *ledgerdb.Store
	m     *Metrics
	pubs  atomic.Int64 // PUBLISHes of its relay
}

// counted counts the PUBLISHes made through a real client.
type counted struct {
	PubSub
	n *atomic.Int64
}

func (c counted) Publish(ctx context.Context, channel string, message any) *redis.IntCmd {
	c.n.Add(1)
	return c.PubSub.Publish(ctx, channel, message)
}

// startProcess starts a process whose relay polls every poll and wakes
// through rdb on channel; it stops when the test ends. The processes of a
// test share ids, as workers share the Snowflake id space.
func (g *rig) startProcess(ids *counterIDs, rdb PubSub, channel string, poll time.Duration) *process {
	g.t.Helper()
	sqlDB, err := g.db.DB()
	if err != nil {
		g.t.Fatal(err)
	}
	p := &process{}
	if p.m, err = NewMetrics(nil); err != nil {
		g.t.Fatal(err)
	}
	r, err := New(sqlDB, g.writer, zap.NewNop(), p.m, Config{Poll: poll, Standby: 100 * time.Millisecond,
		Wakes: Wakes{Redis: counted{PubSub: rdb, n: &p.pubs}, Channel: channel}})
	if err != nil {
		g.t.Fatal(err)
	}
	if p.store, err = ledgerdb.New(sqlDB, ids, nil, ledgerdb.Options{Events: ledgerdb.Events{Written: r.Wake}}); err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	g.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			g.t.Errorf("Run: %v", err)
		}
		_ = p.store.Close()
	})
	return p
}

// leading waits until p's relay leads and listens on channel.
func (p *process) leading(t *testing.T, rdb redis.UniversalClient, channel string) {
	t.Helper()
	waitFor(t, "the relay leads and listens", func() bool {
		n, err := rdb.PubSubNumSub(context.Background(), channel).Result()
		return testutil.ToFloat64(p.m.leader) == 1 && err == nil && n[channel] == 1
	})
}

// TestWakeCrossesProcesses: rows committed by a process that does not lead
// are published by the one that does, woken through Redis: its poll is an
// hour, so within the test only a wake can make it look. The leader's own
// commits wake it in process, without a PUBLISH.
func TestWakeCrossesProcesses(t *testing.T) {
	g := newRig(t, ledgerdb.Events{})
	rd := testenv.NewRedis(t)
	channel := rd.Keys.OutboxWake(g.dbName)
	ids := &counterIDs{}
	leader := g.startProcess(ids, rd.Client, channel, time.Hour)
	leader.leading(t, rd.Client, channel)
	other := g.startProcess(ids, rd.Client, channel, time.Hour)
	ctx := context.Background()
	// The leader looks once on leading and once on subscribing, which may
	// come after the first two commits: the third is published only if a
	// message woke it.
	for i := range 3 {
		if err := grant(ctx, other.store, "m-1", 10, fmt.Sprintf("g-%d", i)); err != nil {
			t.Fatal(err)
		}
		g.waitDrained() // within 30 s: long before the poll
	}
	if err := grant(ctx, leader.store, "m-1", 10, "g-leader"); err != nil {
		t.Fatal(err)
	}
	g.waitDrained()
	if n := other.pubs.Load(); n < 1 || n > 3 {
		t.Errorf("the other process published %d wakes, want 1 to 3 (at most one per commit)", n)
	}
	if n := leader.pubs.Load(); n != 0 {
		t.Errorf("the leading process published %d wakes, want 0", n)
	}
	if got := testutil.ToFloat64(leader.m.published); got != 4 {
		t.Errorf("the leader published %v events, want 4", got)
	}
}

// TestIdleRelaysPublishNoWake: without commits, neither the leading relay
// (polling often here) nor a standby issues a PUBLISH.
func TestIdleRelaysPublishNoWake(t *testing.T) {
	g := newRig(t, ledgerdb.Events{})
	rd := testenv.NewRedis(t)
	channel := rd.Keys.OutboxWake(g.dbName)
	ids := &counterIDs{}
	leader := g.startProcess(ids, rd.Client, channel, 10*time.Millisecond)
	leader.leading(t, rd.Client, channel)
	standby := g.startProcess(ids, rd.Client, channel, 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // the leader's polls, the standby's tries for the lock
	if n := leader.pubs.Load() + standby.pubs.Load(); n != 0 {
		t.Fatalf("idle relays published %d wakes, want 0", n)
	}
}

// TestRelayPollsThroughRedisOutage: with the wake channel's Redis down, a
// commit does not wait for it, the poll publishes the rows and the failures
// are counted; once Redis is back the leader listens again.
func TestRelayPollsThroughRedisOutage(t *testing.T) {
	g := newRig(t, ledgerdb.Events{})
	srv := testenv.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	channel := keyspace.Keyspace{}.OutboxWake(g.dbName) // a Redis of the test's own
	ids := &counterIDs{}
	leader := g.startProcess(ids, rdb, channel, 200*time.Millisecond)
	leader.leading(t, rdb, channel)
	other := g.startProcess(ids, rdb, channel, 200*time.Millisecond)
	srv.Kill()
	ctx := context.Background()
	for i := range 3 {
		if err := grant(ctx, other.store, "m-1", 10, fmt.Sprintf("g-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	g.waitDrained()
	waitFor(t, "failed PUBLISH and subscription counted", func() bool {
		return testutil.ToFloat64(other.m.errors.WithLabelValues("wake")) >= 1 &&
			testutil.ToFloat64(leader.m.errors.WithLabelValues("wake")) >= 1
	})
	srv.Start()
	leader.leading(t, rdb, channel)
}
