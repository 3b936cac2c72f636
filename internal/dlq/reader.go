package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/segmentio/kafka-go"
)

// Range is the offsets [From, To) of one partition.
type Range struct {
	Partition int   `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// Len is the number of offsets in the range.
func (r Range) Len() int64 { return max(0, r.To-r.From) }

// errStopScan, returned by a scan callback, ends the scan early without error.
var errStopScan = errors.New("dlq: stop scan")

// Watermarks returns one Range per partition of topic, in partition order:
// from the first offset still in the log to the high watermark, both as of now.
func (c *Client) Watermarks(ctx context.Context, topic string) ([]Range, error) {
	kc := c.kafkaClient()
	meta, err := kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, err)
	}
	var parts []int
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("dlq: topic %s has no partitions: %w", topic, kafka.UnknownTopicOrPartition)
	}
	slices.Sort(parts)
	reqs := make([]kafka.OffsetRequest, 0, 2*len(parts))
	for _, p := range parts {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := kc.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("dlq: offsets of %s: %w", topic, err)
	}
	byPart := map[int]kafka.PartitionOffsets{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("dlq: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		byPart[po.Partition] = po
	}
	out := make([]Range, 0, len(parts))
	for _, p := range parts {
		po, ok := byPart[p]
		if !ok {
			return nil, fmt.Errorf("dlq: offsets of %s/%d: missing from the response", topic, p)
		}
		out = append(out, Range{Partition: p, From: po.FirstOffset, To: po.LastOffset})
	}
	return out, nil
}

// Scan reads the ranges of topic one partition after the other, in the order
// given, and calls fn for every record a read_committed consumer sees, in
// offset order (ReadCommitted). It reads partitions at explicit offsets: no
// consumer group, nothing committed. fn returning errStopScan ends the scan
// with a nil error.
func (c *Client) Scan(ctx context.Context, topic string, ranges []Range, fn func(kafka.Message) error) error {
	rc := ReadConfig{Brokers: c.b.Addrs, Opts: c.b.Franz, Topic: topic, PollWait: c.opts.PollWait, Stall: c.opts.Stall}
	for _, rg := range ranges {
		if err := ReadCommitted(ctx, rc, rg, fn); err != nil {
			if errors.Is(err, errStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}
