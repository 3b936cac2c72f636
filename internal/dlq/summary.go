package dlq

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

// Summary counts the records of a dead-letter topic.
type Summary struct {
	Topic      string         `json:"topic"`
	Partitions []Range        `json:"partitions"` // what was read: first offset to the high watermark at start
	Total      int            `json:"total"`      // every message read, readable or not
	Unreadable int            `json:"unreadable"` // messages without dead-letter headers
	Replayed   int            `json:"replayed"`   // records of payloads that were replayed before (replay count > 0)
	ByClass    map[Class]int  `json:"by_class"`
	ByTopic    map[string]int `json:"by_original_topic"`
	ByMerchant map[string]int `json:"by_merchant"`
	Oldest     time.Time      `json:"oldest,omitzero"` // DLQ timestamps: when records were dead-lettered
	Newest     time.Time      `json:"newest,omitzero"`
}

// NewSummary returns an empty summary of topic over the ranges.
func NewSummary(topic string, ranges []Range) *Summary {
	return &Summary{
		Topic: topic, Partitions: ranges,
		ByClass: map[Class]int{}, ByTopic: map[string]int{}, ByMerchant: map[string]int{},
	}
}

// Add counts one entry.
func (s *Summary) Add(e Entry) {
	s.Total++
	if !e.Time.IsZero() {
		if s.Oldest.IsZero() || e.Time.Before(s.Oldest) {
			s.Oldest = e.Time
		}
		if e.Time.After(s.Newest) {
			s.Newest = e.Time
		}
	}
	s.ByMerchant[e.Merchant]++
	if e.Err != nil {
		s.Unreadable++
		return
	}
	s.ByClass[e.Class]++
	s.ByTopic[e.OriginalTopic]++
	if e.ReplayCount > 0 {
		s.Replayed++
	}
}

// Summarize reads topic from its first offsets to the high watermarks taken
// at the start, counts every message, and hands each entry to each (which may
// be nil) in partition and offset order.
func (c *Client) Summarize(ctx context.Context, topic string, each func(Entry) error) (*Summary, error) {
	ranges, err := c.Watermarks(ctx, topic)
	if err != nil {
		return nil, err
	}
	s := NewSummary(topic, ranges)
	err = c.Scan(ctx, topic, ranges, func(m kafka.Message) error {
		e := Inspect(m)
		s.Add(e)
		if each != nil {
			return each(e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
