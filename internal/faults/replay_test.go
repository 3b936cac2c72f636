package faults

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/testenv"
)

// The operator's loop with a real worker: a poison message is dead-lettered,
// replayed, and dead-lettered again by the worker. A second replay of the
// same filter sends nothing, the listing shows one message with its copy,
// and a resolution takes it out of both. The worker's lines are strict JSON.
func TestReplayTwiceWithTheWorker(t *testing.T) {
	g := newRig(t, rigOptions{partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := g.startMember(1, nil)
	g.produce(ctx, []kafka.Message{{Key: []byte("m-poison"), Value: []byte(`{"event_id":"evt-poison","merchant_id":"m-poison","amount":"x"}`)}})
	c, err := dlq.NewClient(dlq.Broker{Addrs: g.kafka.Brokers, Transport: g.transport})
	if err != nil {
		t.Fatal(err)
	}
	records := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); len(g.readDLQ(ctx)) < n; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the DLQ never held %d record(s)", n)
			}
		}
	}
	records(1)
	o := dlq.ReplayOptions{DLQTopic: g.dlqTopic, ProgressFile: filepath.Join(t.TempDir(), "p.jsonl"),
		Filter: dlq.Filter{Merchants: []string{"m-poison"}, Classes: []dlq.Class{dlq.ClassInvalid}}}
	if rep, err := c.Replay(ctx, o, nil); err != nil || rep.Sent != 1 {
		t.Fatalf("first replay %+v %v, want 1 sent", rep, err)
	}
	records(2) // the worker failed it again
	rep, err := c.Replay(ctx, o, nil)
	if err != nil || rep.Sent != 0 || !rep.Resumed || rep.Copies != 1 {
		t.Fatalf("second replay %+v %v, want nothing sent and the copy skipped", rep, err)
	}
	var listed []dlq.Entry
	s, err := c.Summarize(ctx, g.dlqTopic, dlq.Filter{}, func(e dlq.Entry) error { listed = append(listed, e); return nil })
	if err != nil || s.Total != 1 || s.Copies != 1 || len(listed) != 1 || listed[0].Copies != 2 || listed[0].ReplayCount != 1 {
		t.Fatalf("ls %+v %+v %v, want one message with its copy, replayed once", s, listed, err)
	}
	if got, err := c.Resolve(ctx, g.dlqTopic, o.Filter, "bad payload, fixed upstream", false); err != nil || len(got) != 1 {
		t.Fatalf("resolve: %d %v", len(got), err)
	}
	if s, err := c.Summarize(ctx, g.dlqTopic, dlq.Filter{}, nil); err != nil || s.Total != 0 || s.Resolved != 1 {
		t.Errorf("ls after resolve %+v %v, want nothing listed", s, err)
	}
	m.Stop()
	var deadLettered int
	for _, l := range testenv.JSONLines(t, m.Logs()) {
		if l["msg"] == "message dead-lettered" {
			deadLettered++
			if l["merchant_id"] != "m-poison" || l["topic"] != g.topic {
				t.Errorf("dead-letter line %v", l)
			}
		}
	}
	if deadLettered != 2 {
		t.Errorf("%d dead-letter lines, want 2", deadLettered)
	}
}
