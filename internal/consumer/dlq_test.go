package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
	decode := func(m kafka.Message) (event, string, error) {
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
	if got := c.dlqSize(t, dlqTopic, 1); got != int64(len(records)) {
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

func decoderFor(f func(kafka.Message) (event, string, error)) Decoder[event] { return f }

// While the dead-letter topic does not exist, the poison message's offset is
// not committed and Ready says why; once the topic exists the record lands
// and the partition moves on.
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

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	r := start(t, cfg, rec.handler(0), nil)
	waitFor(t, 10*time.Second, "dead-letter scan retried", func() bool { return value(t, r.m.retries.WithLabelValues(retryScan)) >= 2 })
	if err := r.c.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "dead-letter topic "+dlqTopic+": the topic does not exist") {
		t.Fatalf("Ready while the DLQ is unavailable = %v", err)
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
}
