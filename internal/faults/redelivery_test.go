package faults

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Delivery duplicated, reordered and rewound: the traffic carries duplicates;
// earlier messages' payloads are sent again later in a shuffled order (an
// event arrives after events that followed it, some after their original was
// long applied); and with the group stopped, its committed offsets are moved
// backwards to seeded random points, so that everything after them is
// delivered again when the workers return. Every redelivered valid event is
// a duplicate with no effect, every redelivered poison message is not
// dead-lettered twice, and the invariants hold.
func TestDuplicatedReorderedRewoundDelivery(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	const partitions = 4
	g := newRig(t, rigOptions{partitions: partitions})
	p.use(g)
	cfg := mixedLoad("redeliver-")
	cfg.Duplicates = 0.1
	tr := traffic(t, p.seed(), cfg, size(2000, 20000), 5)
	truth := newTruth(tr)
	g.grantTraffic(ctx, tr.Merchants(), 5000)

	// Round 1: the traffic, then a shuffled sample of it again.
	members := []*member{g.startMember(1, nil), g.startMember(2, nil)}
	resent := resend(p.rng, tr.Messages, 0.1)
	for _, m := range resent {
		truth.add(m)
	}
	g.produce(ctx, tr.Messages)
	p.fired(ctx, "resend", "", fmt.Sprintf("%d payloads", len(resent)))
	g.produce(ctx, resent)
	g.drain(ctx, time.Minute)
	before := g.outcomes(ctx, members)
	for _, m := range members {
		m.Stop()
	}

	// Rewind the stopped group, and send more old payloads while it is down.
	p.fired(ctx, "rewind", "", "")
	valid, invalid := g.rewind(ctx, p.rng, partitions, truth)
	more := resend(p.rng, tr.Messages, 0.05)
	for _, m := range more {
		truth.add(m)
	}
	p.fired(ctx, "resend", "", fmt.Sprintf("%d payloads", len(more)))
	g.produce(ctx, more)
	if len(resent) == 0 || len(more) == 0 || valid == 0 {
		t.Fatalf("nothing to redeliver: %d and %d payloads re-sent, %d valid messages rewound", len(resent), len(more), valid)
	}
	t.Logf("re-sent %d payloads, rewound the group over %d valid and %d poison messages, re-sent %d more",
		len(resent), valid, invalid, len(more))

	// Round 2: the workers return and get everything after the rewound offsets again.
	members = []*member{g.startMember(1, nil), g.startMember(2, nil)}
	g.drain(ctx, time.Minute)
	after := g.outcomes(ctx, members)
	for _, m := range members {
		m.Stop()
	}
	t.Logf("outcomes before the rewind %v; after it %v", before, after)
	g.settle(ctx, truth.produced)
	if got := after["duplicate"]; got < float64(valid) {
		t.Errorf("%.0f duplicate outcomes after the rewind, want at least the %d valid messages redelivered", got, valid)
	}
}

// resend picks a share of msgs at random, in a shuffled order.
func resend(rng *mrand.Rand, msgs []kafka.Message, share float64) []kafka.Message {
	var out []kafka.Message
	for _, m := range msgs {
		if rng.Float64() < share {
			out = append(out, m)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// outcomes sums billing_events_total by outcome over running members.
func (g *rig) outcomes(ctx context.Context, members []*member) map[string]float64 {
	g.t.Helper()
	out := map[string]float64{}
	for _, m := range members {
		s, err := m.Scrape(ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, o := range []string{"applied", "duplicate", "insufficient", "unknown_merchant", "conflict"} {
			out[o] += outcome(s, o)
		}
	}
	return out
}

// rewind commits, for the stopped (empty) group, an offset at a random point
// of each partition, and counts the messages that will be delivered again:
// those that decode (valid) and those that do not.
func (g *rig) rewind(ctx context.Context, rng *mrand.Rand, partitions int, truth *truth) (valid, invalid int) {
	g.t.Helper()
	client := g.client()
	var reqs []kafka.OffsetRequest
	for p := range partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{g.topic: reqs}})
	if err != nil {
		g.t.Fatal(err)
	}
	commits := map[string][]kafka.OffsetCommit{}
	for _, p := range ends.Topics[g.topic] {
		if p.LastOffset == 0 {
			continue
		}
		to := rng.Int64N(p.LastOffset)
		commits[g.topic] = append(commits[g.topic], kafka.OffsetCommit{Partition: p.Partition, Offset: to})
		v, inv := g.countRange(ctx, p.Partition, to, p.LastOffset, truth)
		valid, invalid = valid+v, invalid+inv
		g.t.Logf("partition %d: committed offset moved back from %d to %d", p.Partition, p.LastOffset, to)
	}
	resp, err := client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{Addr: kafka.TCP(g.kafka.Brokers[0]), GroupID: g.group,
		GenerationID: -1, Topics: commits})
	if err != nil {
		g.t.Fatal(err)
	}
	for _, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				g.t.Fatalf("rewind partition %d: %v", p.Partition, p.Error)
			}
		}
	}
	return valid, invalid
}

// countRange reads partition p over [from, to) and counts the messages that
// are events of the truth (valid) and the others (poison, conflicts).
func (g *rig) countRange(ctx context.Context, p int, from, to int64, truth *truth) (valid, invalid int) {
	g.t.Helper()
	err := g.readRange(ctx, g.topic, p, from, to, func(m kafka.Message) {
		if truth.isEvent(m) {
			valid++
		} else {
			invalid++
		}
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return valid, invalid
}

// readRange calls fn for every message of topic's partition p over
// [from, to).
func (g *rig) readRange(ctx context.Context, topic string, p int, from, to int64, fn func(kafka.Message)) error {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: g.kafka.Brokers, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for off := from; off < to; {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("read %s/%d at %d: %w", topic, p, off, err)
		}
		off = m.Offset + 1
		fn(m)
	}
	return nil
}
