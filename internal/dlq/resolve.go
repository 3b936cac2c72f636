package dlq

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Resolve marks the unresolved messages f selects resolved, so listings and
// replays leave them out, and returns them (dryRun: marks nothing). A mark is
// a message of the DLQ topic itself, keyed like the records it resolves and
// written with the consumer's key hash: it needs no other store, every
// operator and tool reading the topic sees it, and compaction keeps it (the
// newest under its key) while it drops the resolved records.
func (c *Client) Resolve(ctx context.Context, topic string, f Filter, note string, dryRun bool) ([]Entry, error) {
	var out []Entry
	if _, err := c.Summarize(ctx, topic, f, func(e Entry) error { out = append(out, e); return nil }); err != nil {
		return nil, err
	}
	if dryRun || len(out) == 0 {
		return out, nil
	}
	at := []byte(time.Now().UTC().Format(timeLayout))
	msgs := make([]kafka.Message, len(out))
	for i, e := range out { // a value, never null: a null one is a tombstone
		msgs[i] = kafka.Message{Key: []byte(identity(e.Record, e.Err)), Value: []byte(cmp.Or(note, "resolved")),
			Headers: []kafka.Header{{Key: HeaderResolved, Value: at}}}
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.b.Addrs...), Topic: topic, Transport: c.b.Transport, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, WriteTimeout: sendTimeout}
	defer w.Close()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("dlq: mark %d message(s) resolved: %w", len(msgs), err)
	}
	return out, nil
}
