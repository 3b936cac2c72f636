package faults

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// storm is one broker fault of the error storm.
type storm struct {
	name string
	run  func(ctx context.Context) (detail string, hits int, err error)
}

// Two in-process workers (under the race detector) consume while the broker
// misbehaves, one fault after another in a seeded order: fetches failing with
// error codes, fetch connections dropped, offset commits refused, heartbeats
// answered REBALANCE_IN_PROGRESS, a third member joining and leaving (with a
// SyncGroup refused on the way), and dead-letter publishes failing, some after
// the broker has appended the record (NOT_ENOUGH_REPLICAS_AFTER_APPEND). Each
// fault must actually hit; the invariants must hold afterwards, every poison
// message in the DLQ once by provenance (copies allowed) included.
func TestBrokerErrorStorm(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	c := g.requireFaultHooks()
	rate := size(250, 400)
	// More traffic than the storm needs (in CI it takes 15-40s of the 90s):
	// the load is stopped when the storm is over, and every fault checks it
	// still runs.
	tr := traffic(t, p.seed(), mixedLoad("storm-"), rate*size(90, 600), 5)
	g.grantTraffic(ctx, tr.Merchants(), 1_000_000)
	members := []*member{g.startMember(1, nil), g.startMember(2, nil)}
	load := p.startLoad(ctx, tr.Messages, rate)

	storms := g.storms(c, p.rng)
	p.rng.Shuffle(len(storms), func(i, j int) { storms[i], storms[j] = storms[j], storms[i] })
	rounds := size(1, 4)
	for round := range rounds {
		for _, s := range storms {
			p.await(ctx, between(p.rng, 200*time.Millisecond, time.Second))
			p.fired(ctx, s.name, "", fmt.Sprintf("round %d", round+1))
			detail, hits, err := s.run(ctx)
			t.Logf("%-28s %3d hit(s), %s (%d messages produced)", s.name, hits, detail, load.sent.Load())
			if err != nil {
				t.Errorf("round %d, %s: %v", round, s.name, err)
			}
		}
	}
	if !load.running() {
		t.Errorf("the load ran out before the storm ended: later faults hit an idle group")
	}
	if err := load.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range storms {
		p.expect(s.name, rounds)
	}
	g.drain(ctx, 2*time.Minute)
	var dup, retries float64
	for _, m := range members {
		s, err := m.Scrape(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dup += outcome(s, "duplicate")
		retries += s.Sum("billing_retries_total")
	}
	t.Logf("drained %d messages; duplicate outcomes %.0f, consumer retries %.0f", len(load.produced()), dup, retries)
	for _, m := range members {
		m.Stop()
	}
	g.settle(ctx, truthOf(load.produced()).produced)
}

// storms lists the faults, each with seeded parameters.
func (g *rig) storms(c *kfake.Cluster, rng *mrand.Rand) []storm {
	pick := func(errs ...*kerr.Error) *kerr.Error { return errs[rng.IntN(len(errs))] }
	for_ := func(lo, hi time.Duration) time.Duration { return between(rng, lo, hi) }
	return []storm{
		{"fetch error codes", func(ctx context.Context) (string, int, error) {
			err := pick(kerr.NotLeaderForPartition, kerr.UnknownServerError, kerr.RequestTimedOut)
			d := for_(time.Second, 3*time.Second)
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: g.topic, Err: err, Count: -1})
			// The window opens at the first faulted fetch: nobody fetches
			// while the group rebalances, which can take seconds.
			werr := waitHits(ctx, h, 1, hitsWithin)
			if werr == nil {
				sleepCtx(ctx, d)
			}
			h.Remove()
			return fmt.Sprintf("%s for %v", err.Message, d.Round(time.Millisecond)), h.Hits(), werr
		}},
		{"fetch connections dropped", func(ctx context.Context) (string, int, error) {
			d := for_(500*time.Millisecond, 2*time.Second)
			var (
				until   time.Time // set by the first dropped fetch; controls run one at a time
				opened  = make(chan struct{})
				abandon atomic.Bool
				hits    atomic.Int64
			)
			c.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				if abandon.Load() || (!until.IsZero() && time.Now().After(until)) {
					c.DropControl()
					return nil, nil, false
				}
				if until.IsZero() {
					until = time.Now().Add(d)
					close(opened)
				}
				c.KeepControl()
				hits.Add(1)
				return nil, errors.New("faults: fetch connection dropped"), true
			})
			select {
			case <-opened:
				sleepCtx(ctx, d+100*time.Millisecond)
			case <-time.After(hitsWithin):
				abandon.Store(true)
			case <-ctx.Done():
				abandon.Store(true)
			}
			return fmt.Sprintf("connection closed for %v", d.Round(time.Millisecond)), int(hits.Load()), atLeastOne(int(hits.Load()))
		}},
		{"offset commits refused", func(ctx context.Context) (string, int, error) {
			err := pick(kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.UnknownServerError, kerr.RebalanceInProgress)
			n := 3 + rng.IntN(8)
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g.group, Err: err, Count: n})
			werr := waitHits(ctx, h, n, hitsWithin)
			h.Remove()
			return fmt.Sprintf("%d x %s", n, err.Message), h.Hits(), werr
		}},
		{"heartbeat forces a rebalance", func(ctx context.Context) (string, int, error) {
			n := 1 + rng.IntN(2)
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: g.group, Err: kerr.RebalanceInProgress, Count: n})
			werr := waitHits(ctx, h, n, hitsWithin)
			h.Remove()
			return fmt.Sprintf("%d x %s", n, kerr.RebalanceInProgress.Message), h.Hits(), werr
		}},
		{"third member joins, leaves", func(ctx context.Context) (string, int, error) {
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SyncGroup}, Group: g.group, Err: kerr.RebalanceInProgress, Count: 1})
			m := g.startMember(3, nil)
			d := for_(2*time.Second, 5*time.Second)
			// It stays d after the refused SyncGroup, so it has joined by then.
			werr := waitHits(ctx, h, 1, hitsWithin)
			if werr == nil {
				sleepCtx(ctx, d)
			}
			m.Stop()
			h.Remove()
			return fmt.Sprintf("stayed %v after the first SyncGroup was refused", d.Round(time.Millisecond)), h.Hits(), werr
		}},
		{"dead-letter publishes fail", func(ctx context.Context) (string, int, error) {
			err := pick(kerr.UnknownServerError, kerr.NotEnoughReplicasAfterAppend, kerr.NotLeaderForPartition)
			n := 2 + rng.IntN(4)
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: g.dlqTopic, Err: err, Count: n})
			werr := waitHits(ctx, h, n, hitsWithin)
			h.Remove()
			return fmt.Sprintf("%d x %s", n, err.Message), h.Hits(), werr
		}},
	}
}

// hitsWithin bounds the wait for a fault's hits; a rebalance in
// progress (no fetches, no commits) can hold it back for a few seconds.
const hitsWithin = 15 * time.Second

func atLeastOne(hits int) error {
	if hits == 0 {
		return errors.New("the fault never hit")
	}
	return nil
}

// waitHits waits until a fault has answered n requests.
func waitHits(ctx context.Context, h *kfake.FaultHandle, n int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := h.Wait(ctx, n); err != nil {
		return fmt.Errorf("%d of %d hits within %v: %w", h.Hits(), n, within, err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
