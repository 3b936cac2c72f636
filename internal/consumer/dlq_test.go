package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/failure"
)

// Undecodable messages, permanent per-item and batch errors go to the DLQ at
// once; an item failing alone MaxAttempts times goes there as exhausted.
// Every record carries its provenance; everything else is handled and the
// offsets committed to the end.
func TestDeadLetters(t *testing.T) {
	c := newCluster(t)
	const parts = 3
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, _ := events(300, 10)
	special := map[string]struct {
		class    dlq.Class
		attempts int
	}{
		"k-1:901:poison": {dlq.ClassInvalid, 1}, "poison": {dlq.ClassInvalid, 1}, "k-2:x": {dlq.ClassInvalid, 1},
		"k-3:902:conflict": {dlq.ClassConflict, 1}, "k-4:903:conflict": {dlq.ClassConflict, 1},
		"k-5:904:refuse":      {dlq.ClassRefused, 1},
		"k-6:905:flaky-item":  {dlq.ClassExhausted, 5}, // fails with a per-item error
		"k-7:906:flaky-batch": {dlq.ClassExhausted, 5}, // fails its whole batch
	}
	// Spread them through the stream; keys decide the partition.
	i := 10
	for v := range special {
		key, _, _ := strings.Cut(v, ":")
		m := kafka.Message{Key: []byte(key), Value: []byte(v), Headers: []kafka.Header{{Key: "trace", Value: []byte("t-" + v)}}}
		msgs = append(msgs[:i], append([]kafka.Message{m}, msgs[i:]...)...)
		i += 40
	}
	c.produce(t, topic, msgs)

	var mu sync.Mutex
	seen := map[string]kafka.Message{} // value -> where it was read
	decode := func(m kafka.Message) (event, Route, error) {
		mu.Lock()
		seen[string(m.Value)] = m
		mu.Unlock()
		return decodeEvent(m)
	}
	rec := newRecorder()
	var sharedBatch atomic.Bool // the flaky-batch message failed a batch of several
	h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		for _, it := range items {
			switch v := string(it.Msg.Value); {
			case strings.HasSuffix(v, ":refuse"):
				return nil, failure.Permanent(failure.ClassRefused, errors.New("value out of range"))
			case strings.HasSuffix(v, ":flaky-batch"):
				if len(items) > 1 {
					sharedBatch.Store(true)
				}
				return nil, errors.New("deadlock found when trying to get lock")
			}
		}
		errs := make([]error, len(items))
		for i, it := range items {
			switch v := string(it.Msg.Value); {
			case strings.Contains(v, "conflict"):
				errs[i] = failure.Permanent(failure.ClassConflict, errors.New("event_id reused"))
			case strings.HasSuffix(v, ":flaky-item"):
				errs[i] = errors.New("lock wait timeout")
			default:
				rec.record(it)
			}
		}
		return errs, nil
	})
	cfg := c.config(topic, dlqTopic)
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := New(cfg, decoderFor(decode), h, func(context.Context) error { return nil }, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, cons, m)

	records := c.readDLQ(t, dlqTopic, len(special))
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "handled", func() bool { return rec.distinct() == 300 })
	r.stop(t)

	for _, rec := range records {
		v := string(rec.Value)
		want, ok := special[v]
		if !ok {
			t.Errorf("unexpected DLQ record %q", v)
			continue
		}
		delete(special, v)
		orig := seen[v]
		if rec.OriginalTopic != topic || rec.OriginalPartition != orig.Partition || rec.OriginalOffset != orig.Offset {
			t.Errorf("%s: provenance %s/%d/%d, want %s/%d/%d", v, rec.OriginalTopic, rec.OriginalPartition, rec.OriginalOffset, topic, orig.Partition, orig.Offset)
		}
		if !rec.OriginalTime.Equal(orig.Time) || string(rec.Key) != string(orig.Key) || rec.Group != cfg.Group {
			t.Errorf("%s: time %v key %q group %q, want %v %q %q", v, rec.OriginalTime, rec.Key, rec.Group, orig.Time, orig.Key, cfg.Group)
		}
		if rec.Class != want.class || rec.Attempts != want.attempts || rec.Message == "" {
			t.Errorf("%s: class %s attempts %d message %q, want %s %d", v, rec.Class, rec.Attempts, rec.Message, want.class, want.attempts)
		}
		if rec.FirstFailure.IsZero() || rec.LastFailure.Before(rec.FirstFailure) {
			t.Errorf("%s: failures first %v last %v", v, rec.FirstFailure, rec.LastFailure)
		}
		if want.class == dlq.ClassExhausted && !rec.LastFailure.After(rec.FirstFailure) {
			t.Errorf("%s: exhausted with first %v = last %v", v, rec.FirstFailure, rec.LastFailure)
		}
		if len(rec.Headers) != 1 || rec.Headers[0].Key != "trace" || string(rec.Headers[0].Value) != "t-"+v {
			t.Errorf("%s: original headers %v", v, rec.Headers)
		}
	}
	if len(special) != 0 {
		t.Errorf("not dead-lettered: %v", special)
	}
	if got := c.dlqSize(t, dlqTopic); got != len(records) {
		t.Errorf("DLQ holds %d records, want %d", got, len(records))
	}
	if got := value(t, m.retries.WithLabelValues(retryItem)); got != 8 {
		t.Errorf("item retries = %v, want 4 for each flaky message", got)
	}
	if got := value(t, m.retries.WithLabelValues(retrySplit)); sharedBatch.Load() && got < 1 {
		t.Errorf("split retries = %v, want the flaky-batch message's batch split", got)
	}
	if got := value(t, m.retries.WithLabelValues(retryOutage)); got != 0 {
		t.Errorf("outage retries = %v with a healthy probe", got)
	}
	if got := value(t, m.dlqPublished); got != 8 {
		t.Errorf("dlq published = %v, want 8", got)
	}
}

func decoderFor(f func(kafka.Message) (event, Route, error)) Decoder[event] { return f }

// While the dead-letter topic does not exist, the poison message's offset is
// not committed and Ready says why; once the topic exists the record lands
// and the partition moves on. Ready names the missing topic even before a
// message needs it.
func TestDeadLetterPublishMustSucceedFirst(t *testing.T) {
	c := newCluster(t)
	const parts = 2
	topic := c.k.Topic(t, parts)
	dlqTopic := strings.ReplaceAll(topic, "topic", "dlq") // not created yet
	msgs, _ := events(100, 5)
	poison := kafka.Message{Key: []byte("k-1"), Value: []byte("k-1:poison")}
	msgs = append(msgs[:50], append([]kafka.Message{poison}, msgs[50:]...)...)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	idle := start(t, c.config(c.k.Topic(t, 1), dlqTopic), newRecorder().handler(0), nil) // no message at all
	absent := func(r *running) bool {
		err := r.c.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "dead-letter topic "+dlqTopic+": the topic does not exist")
	}
	waitFor(t, 10*time.Second, "Ready naming the missing topic", func() bool { return absent(idle) })

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	r := start(t, cfg, rec.handler(0), nil)
	waitFor(t, 10*time.Second, "dead-letter publish retried", func() bool { return value(t, r.m.retries.WithLabelValues(retryDLQ)) >= 2 })
	if !absent(r) {
		t.Fatalf("Ready while the DLQ is unavailable = %v", r.c.Ready(context.Background()))
	}
	_, end := c.offsets(t, topic, parts)
	committed := c.committed(t, cfg.Group, topic, parts)
	if err := rec.unhandledBelow(committed, first); err != nil {
		t.Fatal(err)
	}
	var done, total int64
	for p := range end {
		done += max(committed[p]-first[p], 0)
		total += end[p] - first[p]
	}
	if done >= total {
		t.Fatalf("everything committed (%d of %d) while the poison message was not dead-lettered", done, total)
	}

	if err := c.k.CreateTopic(dlqTopic, 1); err != nil {
		t.Fatal(err)
	}
	records := c.readDLQ(t, dlqTopic, 1)
	if string(records[0].Value) != "k-1:poison" || records[0].Class != dlq.ClassInvalid {
		t.Fatalf("DLQ record %q class %s", records[0].Value, records[0].Class)
	}
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "ready", func() bool { return r.c.Ready(context.Background()) == nil })
	waitFor(t, 5*time.Second, "the idle consumer ready", func() bool { return idle.c.Ready(context.Background()) == nil })
}

// withPoison inserts n undecodable messages into msgs, spread over keys and
// so partitions, and returns their values.
func withPoison(msgs []kafka.Message, n int) ([]kafka.Message, []string) {
	var values []string
	step := len(msgs) / (n + 1)
	for i := n; i >= 1; i-- {
		key := fmt.Sprintf("k-%d", i)
		v := fmt.Sprintf("%s:poison-%d", key, i)
		at := i * step
		msgs = append(msgs[:at], append([]kafka.Message{{Key: []byte(key), Value: []byte(v)}}, msgs[at:]...)...)
		values = append(values, v)
	}
	return msgs, values
}

// dlqRecords reads every record of a dead-letter topic, copies included,
// through a transport of its own: a shared one's metadata cache may not know
// a topic created since.
func (c *cluster) dlqRecords(t *testing.T, topic string) []dlq.Record {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client, err := dlq.NewClient(dlq.Broker{Addrs: c.k.Brokers, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs, err := client.Records(ctx, topic)
	if err != nil {
		t.Fatalf("read DLQ: %v", err)
	}
	return recs
}

func (c *cluster) dlqSize(t *testing.T, topic string) int { return len(c.dlqRecords(t, topic)) }

// checkDeadLettered asserts the dead-letter invariant: every poison message
// is in the DLQ, and distinct by provenance exactly once (copies of one
// provenance are the same message), nothing else is. It returns the copies
// of each poison value.
func (c *cluster) checkDeadLettered(t *testing.T, topic, dlqTopic string, poison []string) map[string]int {
	t.Helper()
	copies := map[string]int{}
	values := map[string]string{} // provenance -> value
	for _, rec := range c.dlqRecords(t, dlqTopic) {
		p := rec.Provenance()
		if v, ok := values[p]; ok && v != string(rec.Value) {
			t.Errorf("%s dead-lettered as %q and %q", p, v, rec.Value)
		}
		if rec.OriginalTopic != topic {
			t.Errorf("%s: original topic %s", rec.Value, rec.OriginalTopic)
		}
		values[p] = string(rec.Value)
		copies[string(rec.Value)]++
	}
	for _, v := range poison {
		if copies[v] == 0 {
			t.Errorf("%s never dead-lettered", v)
		}
	}
	if len(values) != len(poison) || len(copies) != len(poison) {
		t.Errorf("DLQ holds %d provenances of %d values, want the %d poison messages", len(values), len(copies), len(poison))
	}
	return copies
}

// A consumer dead-letters poison messages, then dies before any commit goes
// through (the coordinator refuses them all, its final one included); a
// second consumer in the same group re-reads everything and dead-letters
// each poison message again: two copies of each, one by provenance.
func TestDeadLetterAgainAfterCrash(t *testing.T) {
	c := newCluster(t)
	kf := c.k.FaultHooks(t)
	const parts, dlqParts, n = 3, 2, 600
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, dlqParts)
	valid, _ := events(n, 20)
	msgs, poison := withPoison(valid, 6)
	c.produce(t, topic, msgs)
	cfg := c.config(topic, dlqTopic)

	refused := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: cfg.Group, Err: kerr.IllegalGeneration, Count: -1})
	rec := newRecorder()
	a := start(t, cfg, rec.handler(0), nil)
	waitFor(t, 15*time.Second, "poison dead-lettered", func() bool { return c.dlqSize(t, dlqTopic) >= len(poison) })
	waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })
	waitFor(t, 5*time.Second, "a commit refused", func() bool { return value(t, a.m.commits.WithLabelValues("error")) > 0 })
	a.stop(t) // its final commit is refused too
	committed, err := c.committedErr(cfg.Group, topic, parts)
	if err != nil && !errors.Is(err, kafka.GroupIdNotFound) { // an empty group may be gone
		t.Fatal(err)
	}
	for p, off := range committed {
		if off >= 0 {
			t.Fatalf("partition %d committed at %d: the crash left nothing uncommitted", p, off)
		}
	}
	refused.Remove()

	b := start(t, cfg, rec.handler(0), nil)
	c.waitAllCommitted(t, cfg.Group, topic, parts)
	b.stop(t)
	for v, n := range c.checkDeadLettered(t, topic, dlqTopic, poison) {
		if n != 2 {
			t.Errorf("%s: %d copies, want one per consumer", v, n)
		}
	}
	if got := value(t, b.m.dlqPublished); got != float64(len(poison)) {
		t.Errorf("second consumer published %v, want %d", got, len(poison))
	}
}

// waitAllCommitted is waitCommittedEnd for a group that may not exist yet
// (no member joined, nothing committed).
func (c *cluster) waitAllCommitted(t *testing.T, group, topic string, partitions int) {
	t.Helper()
	_, end := c.offsets(t, topic, partitions)
	waitFor(t, 15*time.Second, "offsets committed to the end", func() bool {
		got, err := c.committedErr(group, topic, partitions)
		if err != nil {
			return false
		}
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	})
}

// A dead-letter publish is committed at once, not at the next
// CommitInterval (here an hour away).
func TestDeadLetterCommitsAtOnce(t *testing.T) {
	c := newCluster(t)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	var msgs []kafka.Message
	for i := range 3 {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte(fmt.Sprintf("k:poison-%d", i))})
	}
	c.produce(t, topic, msgs)
	cfg := c.config(topic, dlqTopic)
	cfg.CommitInterval = time.Hour
	r := start(t, cfg, newRecorder().handler(0), nil)
	waitFor(t, 10*time.Second, "dead-lettered", func() bool { return c.dlqSize(t, dlqTopic) >= 3 })
	c.waitAllCommitted(t, cfg.Group, topic, 1) // before Run's final commit
	r.stop(t)
	if got := c.dlqSize(t, dlqTopic); got != 3 {
		t.Errorf("DLQ holds %d records, want 3", got)
	}
}

// Dead-letter writes that fail: a produce answered with an error after the
// append (NOT_ENOUGH_REPLICAS_AFTER_APPEND, or a timeout on a real broker),
// which the retry writes again (a copy), and writes refused until the fault
// goes, during which the poison messages' partitions commit nothing past them
// and Ready says why. Either way every poison message lands, one by provenance.
func TestDeadLetterFailedWrites(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    *kerr.Error
		count  int
		copies bool // the failed write landed all the same
	}{
		{"answered after append", kerr.NotEnoughReplicasAfterAppend, 2, true},
		{"refused", kerr.PolicyViolation, -1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			kf := c.k.FaultHooks(t)
			const parts, n = 2, 100
			topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
			valid, _ := events(n, 10)
			msgs, poison := withPoison(valid, 2)
			c.produce(t, topic, msgs)
			first, _ := c.offsets(t, topic, parts)

			fault := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: dlqTopic, Err: tt.err, Count: tt.count})
			defer fault.Remove()
			rec := newRecorder()
			cfg := c.config(topic, dlqTopic)
			r := start(t, cfg, rec.handler(0), nil)
			if tt.count < 0 {
				waitFor(t, 10*time.Second, "dead-letter publish retried", func() bool { return value(t, r.m.retries.WithLabelValues(retryDLQ)) >= 2 })
				waitFor(t, 10*time.Second, "handling goes on", func() bool { return rec.distinct() > 0 })
				if err := r.c.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "dead-letter topic "+dlqTopic) {
					t.Fatalf("Ready while dead-letter writes fail = %v", err)
				}
				time.Sleep(3 * cfg.CommitInterval)
				committed := c.committed(t, cfg.Group, topic, parts)
				_, end := c.offsets(t, topic, parts)
				for p := range end {
					if committed[p] >= end[p] {
						t.Fatalf("partition %d committed to its end %d while its poison message was not dead-lettered", p, end[p])
					}
				}
				if err := rec.unhandledBelow(committed, first); err != nil {
					t.Fatal(err)
				}
				if got := c.dlqSize(t, dlqTopic); got != 0 {
					t.Fatalf("refused writes left %d records", got)
				}
				fault.Remove()
			}
			c.waitAllCommitted(t, cfg.Group, topic, parts)
			waitFor(t, 5*time.Second, "ready", func() bool { return r.c.Ready(context.Background()) == nil })
			r.stop(t)
			if fault.Hits() == 0 {
				t.Fatal("no write failed")
			}
			copies := 0
			for _, n := range c.checkDeadLettered(t, topic, dlqTopic, poison) {
				copies += n - 1
			}
			if tt.copies != (copies > 0) {
				t.Errorf("%d extra copies; want them only when a failed write landed", copies)
			}
			if got := value(t, r.m.retries.WithLabelValues(retryDLQ)); got == 0 {
				t.Error("no dead-letter retry counted")
			}
		})
	}
}
