package consumer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/testenv"
)

// event is the test payload: value "key:seq" or "key:seq:tag"; a value
// containing "poison" is undecodable.
type event struct {
	Key string
	Seq int
}

func decodeEvent(m kafka.Message) (event, Route, error) {
	v := string(m.Value)
	k, s, ok := strings.Cut(v, ":")
	s, _, _ = strings.Cut(s, ":") // an optional tag follows
	seq, err := strconv.Atoi(s)
	if !ok || err != nil || strings.Contains(v, "poison") {
		return event{}, Route{}, fmt.Errorf("undecodable value %q", v)
	}
	return event{Key: k, Seq: seq}, Route{Key: k}, nil
}

// handlerFunc adapts a function to Handler.
type handlerFunc func(ctx context.Context, items []Item[event]) ([]error, error)

func (f handlerFunc) HandleBatch(ctx context.Context, items []Item[event]) ([]error, error) {
	return f(ctx, items)
}

// recorder is the fake handler's memory: which offsets were handled, how
// often, and in which order per key.
type recorder struct {
	mu      sync.Mutex
	handled map[int]map[int64]int
	seqs    map[string][]int
	n       int // distinct offsets handled
}

func newRecorder() *recorder {
	return &recorder{handled: map[int]map[int64]int{}, seqs: map[string][]int{}}
}

func (r *recorder) record(it Item[event]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.handled[it.Msg.Partition]
	if p == nil {
		p = map[int64]int{}
		r.handled[it.Msg.Partition] = p
	}
	if p[it.Msg.Offset] == 0 {
		r.n++
	}
	p[it.Msg.Offset]++
	r.seqs[it.Value.Key] = append(r.seqs[it.Value.Key], it.Value.Seq)
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *recorder) times(partition int, offset int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled[partition][offset]
}

// handler records every item as done, after an optional pause per batch.
func (r *recorder) handler(pause time.Duration) handlerFunc {
	return func(ctx context.Context, items []Item[event]) ([]error, error) {
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		for _, it := range items {
			r.record(it)
		}
		return nil, nil
	}
}

// checkOrder asserts each key's first deliveries came in sequence order, and
// all of 0..want[key]-1 came.
func (r *recorder) checkOrder(t *testing.T, want map[string]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, n := range want {
		seen := map[int]bool{}
		next := 0
		for _, s := range r.seqs[key] {
			if seen[s] {
				continue // a redelivery
			}
			if s != next {
				t.Fatalf("key %s: first delivery of seq %d, want %d (order %v)", key, s, next, r.seqs[key])
			}
			seen[s] = true
			next++
		}
		if next != n {
			t.Fatalf("key %s: %d of %d seqs handled", key, next, n)
		}
	}
}

// unhandledBelow returns an error naming an offset below a committed offset
// that was never handled.
func (r *recorder) unhandledBelow(committed map[int]int64, first map[int]int64) error {
	for p, c := range committed {
		for off := first[p]; off < c; off++ {
			if r.times(p, off) == 0 {
				return fmt.Errorf("partition %d committed at %d but offset %d was never handled", p, c, off)
			}
		}
	}
	return nil
}

// cluster is a kfake broker with topics and an admin client for one test.
type cluster struct {
	k     *testenv.Kafka
	tr    *kafka.Transport
	admin *kafka.Client
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	k := testenv.NewKafka(t)
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &cluster{k: k, tr: tr, admin: &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: 10 * time.Second}}
}

func (c *cluster) config(topic, dlqTopic string) Config {
	return Config{
		Brokers: c.k.Brokers, Topic: topic, Group: "g-" + topic, DLQTopic: dlqTopic,
		Lanes: 4, BatchSize: 32, LatencyBudget: 2 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
		MaxInFlightPerPartition: 256, BackoffInitial: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond,
		ProbeTimeout: time.Second, ShutdownTimeout: 5 * time.Second,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 2 * time.Second,
		JoinGroupBackoff: 100 * time.Millisecond, GroupTimeout: time.Second, MaxWait: 50 * time.Millisecond,
	}
}

// produce writes msgs in order (a key's messages keep their order: one partition each).
func (c *cluster) produce(t testing.TB, topic string, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(c.k.Brokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, Transport: c.tr}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(msgs) > 0 {
		n := min(len(msgs), 5000)
		if err := w.WriteMessages(ctx, msgs[:n]...); err != nil {
			t.Fatalf("produce: %v", err)
		}
		msgs = msgs[n:]
	}
}

// events builds n messages over keys k-0..k-(keys-1), seq counting per key.
func events(n, keys int) ([]kafka.Message, map[string]int) {
	msgs := make([]kafka.Message, n)
	count := map[string]int{}
	for i := range msgs {
		key := "k-" + strconv.Itoa(i%keys)
		msgs[i] = kafka.Message{Key: []byte(key), Value: []byte(key + ":" + strconv.Itoa(count[key]))}
		count[key]++
	}
	return msgs, count
}

func (c *cluster) offsets(t testing.TB, topic string, partitions int) (first, end map[int]int64) {
	t.Helper()
	var reqs []kafka.OffsetRequest
	for p := 0; p < partitions; p++ {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := c.admin.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	first, end = map[int]int64{}, map[int]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("list offsets partition %d: %v", p.Partition, p.Error)
		}
		first[p.Partition], end[p.Partition] = p.FirstOffset, p.LastOffset
	}
	return first, end
}

// committed returns the group's committed offsets (-1: none).
func (c *cluster) committed(t testing.TB, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	out, err := c.committedErr(group, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *cluster) committedErr(group, topic string, partitions int) (map[int]int64, error) {
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	resp, err := c.admin.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out, nil
}

// waitCommittedEnd waits until the group committed every partition to its end.
func (c *cluster) waitCommittedEnd(t *testing.T, group, topic string, partitions int) {
	t.Helper()
	_, end := c.offsets(t, topic, partitions)
	waitFor(t, 10*time.Second, "offsets committed to the end", func() bool {
		got := c.committed(t, group, topic, partitions)
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	})
}

// readDLQ waits for n records of a dead-letter topic and returns them.
func (c *cluster) readDLQ(t *testing.T, topic string, n int) []dlq.Record {
	t.Helper()
	var out []dlq.Record
	waitFor(t, 10*time.Second, fmt.Sprintf("%d dead-letter records", n), func() bool {
		out = c.dlqRecords(t, topic)
		return len(out) >= n
	})
	return out[:n]
}

// running is a consumer whose Run goes on in the background.
type running struct {
	c      *Consumer[event]
	m      *Metrics
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	took   time.Duration
	err    error
}

func start(t testing.TB, cfg Config, h Handler[event], probe Probe) *running {
	t.Helper()
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, decodeEvent, h, probe, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, c, m)
}

// run starts c.Run in the background; the test's cleanup stops it.
func run(t testing.TB, c *Consumer[event], m *Metrics) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it; it returns how long Run took to return.
func (r *running) stop(t testing.TB) time.Duration {
	t.Helper()
	r.once.Do(func() {
		began := time.Now()
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(30 * time.Second):
			r.err = errors.New("Run did not return within 30s")
		}
		r.took = time.Since(began)
	})
	if r.err != nil {
		t.Errorf("Run: %v", r.err)
	}
	return r.took
}

// testLogger writes to the test's log, shown when the test fails (or with
// -v): info and up, debug too with CONSUMER_TEST_LOG=debug. Benchmarks log
// nothing: a line per dead-lettered message would be measured too.
func testLogger(t testing.TB) *zap.Logger {
	if _, bench := t.(*testing.B); bench {
		return zap.NewNop()
	}
	level := zap.InfoLevel
	if os.Getenv("CONSUMER_TEST_LOG") == "debug" {
		level = zap.DebugLevel
	}
	return zaptest.NewLogger(t, zaptest.Level(level))
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// value sums what a collector currently reports (a counter, a gauge, or all
// children of a vector).
func value(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var sum float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			sum += d.Counter.GetValue()
		case d.Gauge != nil:
			sum += d.Gauge.GetValue()
		case d.Histogram != nil:
			sum += float64(d.Histogram.GetSampleCount())
		}
	}
	return sum
}
