// Package scenario drives the whole system from the outside, the same way for
// the demo, the end-to-end tests and the fault suite: build traffic whose
// truth is known, produce it, wait until the consumer group has committed all
// of it, read the dead-letter topic back, and hand it all to the invariant checker.
package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/workload"
)

// Traffic is a stream of messages and the truth about it.
type Traffic struct {
	Messages []kafka.Message
	// Refunds are the stream's refunds (for the refunds topic), with the
	// payment of every early one among Messages.
	Refunds  []workload.Message
	Produced invariant.Produced
	// Counts by kind, for summaries.
	Valid, Duplicates, Malformed, Conflicts int
}

// BuildTraffic generates n messages from cfg (and the payments of early
// refunds) and appends conflicts conflicting duplicates: earlier event_ids
// re-sent for the same merchant with another amount (same partition, so
// they arrive after the original).
func BuildTraffic(cfg workload.Config, n, conflicts int) (Traffic, error) {
	g, err := workload.New(cfg)
	if err != nil {
		return Traffic{}, err
	}
	msgs := make([]workload.Message, n)
	for i := range msgs {
		msgs[i] = g.Next()
	}
	msgs = append(msgs, g.Drain()...)
	var t Traffic
	var originals []event.PaymentSucceeded
	for _, m := range msgs {
		if m.Topic == workload.Refunds {
			t.Refunds = append(t.Refunds, m)
			continue
		}
		t.Messages = append(t.Messages, kafka.Message{Key: m.Key, Value: m.Value})
		switch m.Kind {
		case workload.Valid:
			t.Valid++
			t.Produced.Valid = append(t.Produced.Valid, m.Event)
			originals = append(originals, m.Event)
		case workload.Duplicate:
			t.Duplicates++
			t.Produced.Valid = append(t.Produced.Valid, m.Event)
		case workload.Malformed:
			t.Malformed++
			t.Produced.Invalid++
		}
	}
	if conflicts > len(originals) {
		return Traffic{}, fmt.Errorf("scenario: %d conflicts asked, only %d originals", conflicts, len(originals))
	}
	step := max(1, len(originals)/max(conflicts, 1))
	for i := 0; i < conflicts; i++ {
		c := originals[i*step]
		c.Amount++ // same event_id and merchant, another amount: a permanent conflict
		t.Messages = append(t.Messages, kafka.Message{Key: []byte(c.MerchantID), Value: c.Encode()})
		t.Conflicts++
		t.Produced.Invalid++
	}
	return t, nil
}

// Merchants returns every merchant the valid traffic touches.
func (t Traffic) Merchants() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range t.Produced.Valid {
		if !seen[e.MerchantID] {
			seen[e.MerchantID] = true
			out = append(out, e.MerchantID)
		}
	}
	return out
}

// Produce writes the messages in chunks, calling progress after each.
func Produce(ctx context.Context, w *kafka.Writer, msgs []kafka.Message, progress func(done int)) error {
	const chunk = 1000
	for i := 0; i < len(msgs); i += chunk {
		part := msgs[i:min(i+chunk, len(msgs))]
		if err := w.WriteMessages(ctx, part...); err != nil {
			return fmt.Errorf("scenario: produce: %w", err)
		}
		if progress != nil {
			progress(i + len(part))
		}
	}
	return nil
}

// GroupLag is how many messages of topic the group has not committed yet.
func GroupLag(ctx context.Context, client *kafka.Client, group, topic string) (int64, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("scenario: metadata: %w", err)
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil {
		return 0, fmt.Errorf("scenario: topic %s: %v", topic, meta.Topics)
	}
	var reqs []kafka.OffsetRequest
	var parts []int
	for _, p := range meta.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
		parts = append(parts, p.ID)
	}
	ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return 0, fmt.Errorf("scenario: list offsets: %w", err)
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return 0, fmt.Errorf("scenario: offset fetch: %w", err)
	}
	done := map[int]int64{}
	for _, p := range committed.Topics[topic] {
		done[p.Partition] = p.CommittedOffset
	}
	var lag int64
	for _, p := range ends.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("scenario: list offsets partition %d: %w", p.Partition, p.Error)
		}
		c := done[p.Partition]
		if c < 0 {
			c = 0 // nothing committed yet
		}
		lag += p.LastOffset - c
	}
	return lag, nil
}

// WaitDrained polls until the group has committed every message of topic.
func WaitDrained(ctx context.Context, client *kafka.Client, group, topic string, progress func(lag int64)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		lag, err := GroupLag(ctx, client, group, topic)
		if err == nil && progress != nil {
			progress(lag)
		}
		if err == nil && lag == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scenario: waiting for group %s to drain %s (lag %d, last error %v): %w", group, topic, lag, err, ctx.Err())
		case <-tick.C:
		}
	}
}
