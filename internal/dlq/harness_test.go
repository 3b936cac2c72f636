package dlq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/testenv"
)

// cluster is a broker, an original topic and a DLQ topic for one test.
type cluster struct {
	k        *testenv.Kafka
	tr       *kafka.Transport
	c        *Client
	orig     string // the original topic, 3 partitions
	dlqTopic string // 2 partitions
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	k := testenv.NewKafka(t)
	// The DLQ topic as production creates it: compaction folds copies.
	c := &cluster{k: k, orig: k.Topic(t, 3), dlqTopic: k.TopicWith(t, 2, map[string]string{"cleanup.policy": "compact,delete"})}
	c.freshClient(t)
	return c
}

// freshClient replaces the client and transport, whose metadata cache (kept
// for 6s) does not know topics created after its first request.
func (c *cluster) freshClient(t *testing.T) {
	t.Helper()
	c.tr = &kafka.Transport{}
	t.Cleanup(c.tr.CloseIdleConnections)
	var err error
	if c.c, err = NewClient(Broker{Addrs: c.k.Brokers, Transport: c.tr}); err != nil {
		t.Fatal(err)
	}
	c.c.pollWait, c.c.stall = 200*time.Millisecond, 10*time.Second
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// seed describes one dead-letter record to write.
type seed struct {
	name         string // for assertions
	dlqPartition int
	origPart     int
	origOffset   int64
	key          string
	value        string
	class        Class
	replays      int
	at           time.Time // DLQ timestamp
}

// baseTime is the DLQ timestamp of the oldest seeded record.
var baseTime = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

func validValue(eventID, merchant string, amount int64) string {
	return string(event.PaymentSucceeded{
		EventID: eventID, PaymentID: "pay-" + eventID, MerchantID: merchant, Amount: amount,
		Source: event.SourcePC, OccurredAt: baseTime.Add(-time.Hour),
	}.Encode())
}

// standardSeeds is a DLQ with every class, several merchants, both partitions,
// a malformed value with and without key, and a record at the replay limit.
func standardSeeds() []seed {
	at := func(min int) time.Time { return baseTime.Add(time.Duration(min) * time.Minute) }
	return []seed{
		{name: "inv-m3", dlqPartition: 0, origPart: 0, origOffset: 10, key: "m-3", value: `{"event_id":"evt-bad","merchant_id":"m-3","amount":"x"}`, class: ClassInvalid, at: at(0)},
		{name: "conf-m1", dlqPartition: 0, origPart: 1, origOffset: 11, key: "m-1", value: validValue("evt-1", "m-1", 5), class: ClassConflict, at: at(10)},
		{name: "ref-m2", dlqPartition: 1, origPart: 2, origOffset: 12, key: "m-2", value: validValue("evt-2", "m-2", 7), class: ClassRefused, at: at(20)},
		{name: "exh-m1", dlqPartition: 1, origPart: 1, origOffset: 13, key: "m-1", value: validValue("evt-3", "m-1", 9), class: ClassExhausted, at: at(30)},
		{name: "inv-nokey", dlqPartition: 0, origPart: 0, origOffset: 14, key: "", value: `not json`, class: ClassInvalid, at: at(40)},
		{name: "conf-m2-max", dlqPartition: 1, origPart: 2, origOffset: 15, key: "m-2", value: validValue("evt-4", "m-2", 3), class: ClassConflict, replays: 3, at: at(50)},
		{name: "exh-m4-once", dlqPartition: 0, origPart: 1, origOffset: 16, key: "m-4", value: validValue("evt-5", "m-4", 2), class: ClassExhausted, replays: 1, at: at(60)},
	}
}

// origMessage is the message as the worker consumed it before it failed.
func (c *cluster) origMessage(s seed) kafka.Message {
	m := kafka.Message{
		Topic: c.orig, Partition: s.origPart, Offset: s.origOffset, Time: s.at.Add(-time.Minute),
		Value:   []byte(s.value),
		Headers: []kafka.Header{{Key: "trace", Value: []byte("trace-" + s.name)}},
	}
	if s.key != "" {
		m.Key = []byte(s.key)
	}
	if s.replays > 0 {
		m.Headers = append(m.Headers,
			kafka.Header{Key: HeaderReplayCount, Value: []byte(fmt.Sprint(s.replays))},
			kafka.Header{Key: HeaderReplayJob, Value: []byte("job-old")})
	}
	return m
}

// write produces msgs, each to its own Topic and Partition.
func (c *cluster) write(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(c.k.Brokers...), Transport: c.tr, Balancer: originalPartition{fallback: &kafka.Hash{}},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	// One at a time, so offsets follow the order given.
	for _, m := range msgs {
		if err := w.WriteMessages(ctxFor(t), m); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// seed writes the records to the DLQ topic and returns name -> DLQ position.
func (c *cluster) seed(t *testing.T, seeds []seed) map[string]pos {
	t.Helper()
	msgs := make([]kafka.Message, len(seeds))
	for i, s := range seeds {
		rec := FromFailure(c.origMessage(s), "billing-worker", s.class, errors.New("boom: "+s.name), 1, s.at.Add(-time.Second), s.at)
		m := rec.KafkaMessage()
		m.Topic, m.Partition, m.Time = c.dlqTopic, s.dlqPartition, s.at
		msgs[i] = m
	}
	before := c.ends(t, c.dlqTopic)
	c.write(t, msgs...)
	out := map[string]pos{}
	next := before
	for _, s := range seeds {
		out[s.name] = pos{s.dlqPartition, next[s.dlqPartition]}
		next[s.dlqPartition]++
	}
	return out
}

type pos struct {
	p int
	o int64
}

func (c *cluster) ends(t *testing.T, topic string) map[int]int64 {
	t.Helper()
	rs, err := c.c.watermarks(ctxFor(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, r := range rs {
		out[r.Partition] = r.To
	}
	return out
}

// readAll returns every message of topic, by partition then offset.
func (c *cluster) readAll(t *testing.T, topic string) []kafka.Message {
	t.Helper()
	rs, err := c.c.watermarks(ctxFor(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	if err := c.c.scan(ctxFor(t), topic, rs, func(m kafka.Message) error { out = append(out, m); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// recorder is an Observer that keeps every step.
type recorder struct {
	steps []Step
	acked []int
	onAck func(sent int)
	onStp func(sends int) // after each step, with the sends (to be acknowledged) so far
	sends int
}

func (r *recorder) Begin(int64) {}
func (r *recorder) Step(s Step) {
	r.steps = append(r.steps, s)
	if s.Action == ActionSend {
		r.sends++
	}
	if r.onStp != nil {
		r.onStp(r.sends)
	}
}
func (r *recorder) Acked(n int) {
	r.acked = append(r.acked, n)
	if r.onAck != nil {
		r.onAck(n)
	}
}

// names maps the steps with action a back to seed names.
func (r *recorder) names(a Action, at map[string]pos) []string {
	byPos := map[pos]string{}
	for n, p := range at {
		byPos[p] = n
	}
	var out []string
	for _, s := range r.steps {
		if s.Action == a {
			out = append(out, byPos[pos{s.Entry.Partition, s.Entry.Offset}])
		}
	}
	return out
}

func header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
