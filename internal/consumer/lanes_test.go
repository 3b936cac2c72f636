package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/testenv"
)

// A lane holds a batch that is not full for its latency budget: two
// messages, then two more, make one batch of four, however long the first
// two wait; and a full batch goes at once, though the budget is an hour.
func TestLaneHoldsForBudget(t *testing.T) {
	c := newCluster(t)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	cfg := c.config(topic, dlqTopic)
	cfg.Lanes, cfg.BatchSize, cfg.LatencyBudget = 1, 4, time.Hour

	calls := make(chan int, 10)
	handler := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		calls <- len(items)
		return nil, nil
	})
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := New(cfg, decodeEvent, handler, nil, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := events(6, 1)
	c.produce(t, topic, msgs[:2])
	r := run(t, cons, m)
	waitFor(t, 15*time.Second, "the first two fetched", func() bool { return value(t, r.m.consumed) == 2 })
	c.produce(t, topic, msgs[2:])
	select {
	case n := <-calls:
		if n != 4 {
			t.Fatalf("first batch of %d, want the 4 of a full batch", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the full batch waited for the budget (an hour)")
	}
	r.stop(t)
	select {
	case n := <-calls:
		t.Errorf("a batch of %d before the budget ran out", n)
	default:
	}
}

// The hold: the budget less the handling time, counted from the oldest
// message's fetch; nothing once that is spent (a backlog), when handling
// alone takes the budget, or when messages come further apart than the hold.
func TestHold(t *testing.T) {
	now := time.Now()
	ms := time.Millisecond
	for _, tc := range []struct {
		name                  string
		age                   time.Duration // of the oldest message
		budget, handling, gap time.Duration
		want                  time.Duration
	}{
		{"fresh", 0, 50 * ms, 5 * ms, ms, 45 * ms},
		{"part spent", 30 * ms, 50 * ms, 5 * ms, ms, 15 * ms},
		{"spent", 45 * ms, 50 * ms, 5 * ms, ms, 0},
		{"backlog: waited a batch already", 200 * ms, 50 * ms, 5 * ms, 0, 0},
		{"no estimates yet", 0, 50 * ms, 0, 0, 50 * ms},
		{"handling takes the budget", 0, 50 * ms, 60 * ms, ms, 0},
		{"no budget", 0, 0, 0, 0, 0},
		{"a trickle: the next message is not due within the hold", 0, 50 * ms, 5 * ms, 100 * ms, 0},
		{"the gap fits the rest of the hold", 20 * ms, 50 * ms, 5 * ms, 20 * ms, 25 * ms},
		{"the gap outlasts the rest of the hold", 30 * ms, 50 * ms, 5 * ms, 20 * ms, 0},
	} {
		if got := hold(now.Add(-tc.age), now, tc.budget, tc.handling, tc.gap); got != tc.want {
			t.Errorf("%s: hold %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The gap between a lane's messages moves an eighth of the way to each new
// one, an idle spell counting as ten budgets at most.
func TestGapEstimate(t *testing.T) {
	ms := time.Millisecond
	l := newLane[event](0, Config{BatchSize: 64})
	t0 := l.last
	l.add(envelope[event]{fetched: t0}, 50*ms)
	l.add(envelope[event]{fetched: t0.Add(time.Hour)}, 50*ms)
	if l.gap != 500*ms/8 || len(l.batch) != 2 {
		t.Fatalf("after an hour's spell: gap %v, want %v; batch of %d", l.gap, 500*ms/8, len(l.batch))
	}
	at := t0.Add(time.Hour)
	for range 60 {
		at = at.Add(ms / 2)
		l.add(envelope[event]{fetched: at}, 50*ms)
	}
	if l.gap > 2*ms {
		t.Errorf("after 60 messages 0.5 ms apart: gap %v", l.gap)
	}
}

// The handling estimate moves an eighth of the way to each batch's time,
// a time past the budget counting as the budget.
func TestHandlingEstimate(t *testing.T) {
	ms := time.Millisecond
	l := newLane[event](0, Config{BatchSize: 1})
	l.handled(80*ms, 50*ms)
	if l.handling != 50*ms/8 {
		t.Fatalf("after a long batch: %v, want %v", l.handling, 50*ms/8)
	}
	for range 100 {
		l.handled(4*ms, 50*ms)
	}
	if l.handling < 4*ms || l.handling > 4*ms+ms/10 {
		t.Errorf("after 100 batches of 4ms: %v", l.handling)
	}
}

// The shards of one key take consecutive lanes: with as many lanes as
// shards, each shard has a lane of its own, and shard 0 is the key's lane.
func TestRouteSpreadsShardsOverLanes(t *testing.T) {
	for _, tc := range []struct{ lanes, shards, distinct int }{
		{4, 1, 1}, {4, 4, 4}, {4, 8, 4}, {8, 3, 3}, {1, 8, 1},
	} {
		seen := map[int]bool{}
		for s := range tc.shards {
			l := Route{Key: "m-hot", Shard: s}.lane(tc.lanes)
			if l < 0 || l >= tc.lanes {
				t.Fatalf("lane %d of %d", l, tc.lanes)
			}
			seen[l] = true
		}
		if len(seen) != tc.distinct {
			t.Errorf("%d shards over %d lanes: %d distinct lanes, want %d", tc.shards, tc.lanes, len(seen), tc.distinct)
		}
		if got, want := (Route{Key: "m-hot"}).lane(tc.lanes), int(fnv32("m-hot")%uint32(tc.lanes)); got != want {
			t.Errorf("shard 0 in lane %d, want the key's lane %d", got, want)
		}
	}
}

// A lane holding a batch joins another lane's batch when it fits, then
// waits for the outcome of the joint call (runLane); one that does not fit,
// or holds an undecodable message (its dead-letter write is its own), keeps
// holding its own.
func TestHeldBatchJoinsAnother(t *testing.T) {
	cfg := Config{BatchSize: 4, LatencyBudget: time.Hour}
	cfg.setDefaults()
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &generation[event]{c: &Consumer[event]{cfg: cfg}, stop: stop}
	a, b := newLane[event](0, cfg), newLane[event](1, cfg)
	g.lanes = []*lane[event]{a, b}
	env := func(key string, seq int) envelope[event] {
		return envelope[event]{value: event{Key: key, Seq: seq}, fetched: time.Now()}
	}
	hold := func(l *lane[event], envs ...envelope[event]) chan gathered {
		l.batch = append(l.batch[:0], envs...)
		res := make(chan gathered, 1)
		go func() {
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			res <- g.gather(l, timer)
		}()
		return res
	}
	// collect until b answered: it may not be waiting in its select yet.
	collect := func(want int) []share[event] {
		deadline := time.Now().Add(10 * time.Second)
		for {
			shares := g.collect(a)
			if len(a.batch) == want || time.Now().After(deadline) {
				return shares
			}
			time.Sleep(time.Millisecond)
		}
	}

	res := hold(b, env("b", 0), env("b", 1))
	a.batch = append(a.batch[:0], env("a", 0), env("a", 1))
	shares := collect(4)
	if got := keys(a.batch); got != "a0 a1 b0 b1" {
		t.Fatalf("batch %s, want a0 a1 b0 b1", got)
	}
	if len(shares) != 1 || shares[0].l != b || shares[0].n != 2 {
		t.Fatalf("shares %v, want b's 2", shares)
	}
	if r := <-res; r != joined {
		t.Fatalf("gather ended %d, want joined", r)
	}

	// b declines: two do not fit in the room of one; c too: its batch holds
	// an undecodable message, whose dead-letter write is its own.
	c := newLane[event](2, cfg)
	g.lanes = append(g.lanes, c)
	poison := env("c", 0)
	poison.err = errors.New("undecodable")
	res = hold(b, env("b", 2), env("b", 3))
	resC := hold(c, poison)
	a.batch = append(a.batch[:0], env("a", 2), env("a", 3), env("a", 4))
	for range 20 {
		if shares := g.collect(a); len(shares) != 0 {
			t.Fatalf("shares %v, want none", shares)
		}
	}
	if got := keys(a.batch); got != "a2 a3 a4" {
		t.Fatalf("batch %s, want a2 a3 a4", got)
	}
	for _, o := range []*lane[event]{b, c} { // waiting for each to answer
		j := &joint[event]{room: 1, give: make(chan []envelope[event], 1)}
		o.join <- j
		if got := <-j.give; got != nil {
			t.Fatalf("lane %d gave %s into a room of 1", o.id, keys(got))
		}
	}
	cancel()
	if r := <-res; r != stopped {
		t.Fatalf("gather ended %d, want stopped", r)
	}
	if r := <-resC; r != stopped {
		t.Fatalf("c's gather ended %d, want stopped", r)
	}
	if got := keys(b.batch); got != "b2 b3" {
		t.Errorf("b holds %s, want b2 b3", got)
	}
}

// A joint batch splits back by lane after its call: a message that fails
// (until it is exhausted, or in an outage) is retried by its own lane alone,
// whether that lane collected the batch or joined it, while the other lane
// goes on with its next batches. The failing message's first retry waits for
// those: lanes still bound to each other would never get that far. Each key
// keeps its order, every message is handled once or dead-lettered, and the
// partition commits up to the failing message, not past it, until it is
// settled.
func TestJointBatchFailsByLane(t *testing.T) {
	clusterDown := testenv.NewRedis(t).Client.Eval(context.Background(),
		"return redis.error_reply('CLUSTERDOWN The cluster is down')", nil).Err()
	if clusterDown == nil {
		t.Fatal("no CLUSTERDOWN error from Redis")
	}
	const lanes = 2
	bad, good := "k-bad", "k-good"
	for i := 0; (Route{Key: good}).lane(lanes) == (Route{Key: bad}).lane(lanes); i++ {
		good = "k-good-" + itoa(i)
	}
	msg := func(key string, seq int) kafka.Message {
		return kafka.Message{Key: []byte(key), Value: []byte(key + ":" + itoa(seq))}
	}
	for _, tc := range []struct {
		name      string
		collector string // the lane whose message comes first collects the other's
		outage    bool   // else the message fails for its own reason until exhausted
	}{
		{"failing lane collects, exhausted", bad, false},
		{"failing lane joins, exhausted", good, false},
		{"failing lane collects, outage", bad, true},
		{"failing lane joins, outage", good, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
			cfg := c.config(topic, dlqTopic)
			cfg.Lanes, cfg.BatchSize, cfg.LatencyBudget, cfg.MaxAttempts = lanes, 8, 5*time.Second, 3 // the second message joins well within the budget, however loaded the machine

			goneOn := make(chan struct{}) // the other lane handled its next batches
			var badTries atomic.Int64
			rec := newRecorder()
			var mu sync.Mutex
			var calls []string
			h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
				errs := make([]error, len(items))
				var call []string
				for i, it := range items {
					call = append(call, string(it.Msg.Value))
					if it.Value.Key != bad {
						continue
					}
					n := badTries.Add(1)
					if n == 2 {
						select {
						case <-goneOn:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
					switch {
					case !tc.outage:
						errs[i] = errors.New("deduct: WRONGTYPE Operation against a key holding the wrong kind of value")
					case n < int64(cfg.MaxAttempts)+3: // more tries than attempts: none counted
						errs[i] = fmt.Errorf("deduct: lock: %w", clusterDown)
					}
				}
				for i, it := range items {
					if errs[i] == nil {
						rec.record(it)
					}
				}
				mu.Lock()
				calls = append(calls, strings.Join(call, " "))
				mu.Unlock()
				return errs, nil
			})
			other := bad
			if tc.collector == bad {
				other = good
			}
			c.produce(t, topic, []kafka.Message{msg(tc.collector, 0)})
			r := start(t, cfg, h, nil)
			waitFor(t, 15*time.Second, "the first message fetched", func() bool { return value(t, r.m.consumed) == 1 })
			c.produce(t, topic, []kafka.Message{msg(other, 0)})
			waitFor(t, 15*time.Second, "the first call", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(calls) > 0
			})
			mu.Lock()
			first := calls[0]
			mu.Unlock()
			if want := tc.collector + ":0 " + other + ":0"; first != want {
				t.Fatalf("first call %q, want the joint batch %q", first, want)
			}

			c.produce(t, topic, []kafka.Message{msg(good, 1), msg(good, 2), msg(good, 3)})
			waitFor(t, 15*time.Second, "the other lane's next batches while the failing message waits", func() bool {
				return rec.distinct() == 4
			})
			badOffset := int64(0)
			if tc.collector == good {
				badOffset = 1
			}
			waitFor(t, 15*time.Second, "the commit up to the failing message", func() bool {
				return c.committed(t, cfg.Group, topic, 1)[0] == badOffset
			})
			if got := rec.times(0, badOffset); got != 0 {
				t.Fatalf("the failing message handled %d times before it was released", got)
			}
			close(goneOn)

			if tc.outage {
				waitFor(t, 15*time.Second, "the failing message handled after the outage", func() bool { return rec.distinct() == 5 })
			} else {
				recs := c.readDLQ(t, dlqTopic, 1)
				if got := recs[0]; string(got.Value) != bad+":0" || got.Class != dlq.ClassExhausted || got.Attempts != cfg.MaxAttempts {
					t.Fatalf("DLQ record %q class %s attempts %d, want %s:0 exhausted after %d", got.Value, got.Class, got.Attempts, bad, cfg.MaxAttempts)
				}
				if got := badTries.Load(); got != int64(cfg.MaxAttempts) {
					t.Errorf("the failing message tried %d times, want %d", got, cfg.MaxAttempts)
				}
			}
			c.waitCommittedEnd(t, cfg.Group, topic, 1)
			r.stop(t)
			dead := 1 // the failing message, exhausted
			if tc.outage {
				dead = 0
			}
			rec.checkOrder(t, map[string]int{good: 4, bad: 1 - dead})
			for off := range int64(5) {
				want := 1
				if off == badOffset {
					want -= dead
				}
				if got := rec.times(0, off); got != want {
					t.Errorf("offset %d handled %d times, want %d", off, got, want)
				}
			}
			if got := c.dlqSize(t, dlqTopic); got != dead {
				t.Errorf("DLQ holds %d records, want %d", got, dead)
			}
		})
	}
}

func keys(envs []envelope[event]) string {
	var s []string
	for _, e := range envs {
		s = append(s, e.value.Key+strconv.Itoa(e.value.Seq))
	}
	return strings.Join(s, " ")
}
