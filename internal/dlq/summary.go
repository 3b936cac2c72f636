package dlq

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

// Summary counts the messages of a dead-letter topic, each once however many
// copies of it the topic holds.
type Summary struct {
	Topic      string         `json:"topic"`
	Selection  string         `json:"selection"`  // the filter's canonical text: "all" for every record
	Partitions []Range        `json:"partitions"` // what was read: first offset to the high watermark at start
	Total      int            `json:"total"`      // messages, readable or not
	Copies     int            `json:"copies"`     // records beyond the first of their message, not counted elsewhere
	Unreadable int            `json:"unreadable"` // messages without dead-letter headers
	Resolved   int            `json:"resolved"`   // messages an operator marked resolved, not counted elsewhere
	Replayed   int            `json:"replayed"`   // records of payloads that were replayed before (replay count > 0)
	ByClass    map[Class]int  `json:"by_class"`
	ByTopic    map[string]int `json:"by_original_topic"`
	ByMerchant map[string]int `json:"by_merchant"`
	Oldest     time.Time      `json:"oldest,omitzero"` // DLQ timestamps: when records were dead-lettered
	Newest     time.Time      `json:"newest,omitzero"`
}

func (s *Summary) add(e Entry) {
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

// Summarize reads topic twice: to group each message's records (copies,
// replays of it that failed again, resolution marks), then to count the
// unresolved messages f selects and hand each (its first record, Copies set,
// ReplayCount its latest copy's) to each, if set. The filter is the one
// Replay takes, so a listing shows exactly what a replay with the same filter
// would consider.
func (c *Client) Summarize(ctx context.Context, topic string, f Filter, each func(Entry) error) (*Summary, error) {
	s := &Summary{Topic: topic, Selection: f.key(), ByClass: map[Class]int{}, ByTopic: map[string]int{}, ByMerchant: map[string]int{}}
	listed := map[string]bool{}
	var err error
	s.Partitions, err = c.walk(ctx, topic, f, true, func(e Entry, id string) error {
		first := !listed[id]
		listed[id] = true
		switch {
		case !first:
			s.Copies++
		case e.Resolved:
			s.Resolved++
		default:
			s.add(e)
			if each != nil {
				return each(e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Trail returns every record of the messages f selects, copies and the
// replays that failed again included, in topic order: a message's history,
// each record with its own replay count and job.
func (c *Client) Trail(ctx context.Context, topic string, f Filter) ([]Entry, error) {
	var out []Entry
	_, err := c.walk(ctx, topic, f, false, func(e Entry, _ string) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// walk groups topic's records by message, then hands fn every record f
// selects in topic order, with its message's Copies and Resolved (and with
// latest, ReplayCount its latest copy's), and returns the ranges it read.
func (c *Client) walk(ctx context.Context, topic string, f Filter, latest bool, fn func(e Entry, id string) error) ([]Range, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	ranges, gs, err := c.groups(ctx, topic, f)
	if err != nil {
		return nil, err
	}
	return ranges, c.scan(ctx, topic, ranges, func(m kafka.Message) error {
		if isMark(m) {
			return nil
		}
		e := inspect(m)
		id := identity(e.Record, e.Err)
		g := gs[id]
		if e.Copies, e.Resolved = g.copies, g.resolved; latest {
			e.ReplayCount = g.replays
		}
		if !f.match(e) {
			return nil
		}
		return fn(e, id)
	})
}
