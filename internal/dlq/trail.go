package dlq

import (
	"context"

	"github.com/segmentio/kafka-go"
)

// Trail returns every record of the messages f selects, copies and the
// replays that failed again included, in topic order: a message's history.
// Each carries its own replay count and job, its message's Copies, and
// Resolved when an operator marked the message resolved.
func (c *Client) Trail(ctx context.Context, topic string, f Filter) ([]Entry, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	all, err := c.watermarks(ctx, topic)
	if err != nil {
		return nil, err
	}
	gs, err := c.groups(ctx, topic, all)
	if err != nil {
		return nil, err
	}
	var out []Entry
	err = c.scan(ctx, topic, f.narrow(all), func(m kafka.Message) error {
		if isMark(m) {
			return nil
		}
		e := inspect(m)
		g := gs[identity(e.Record, e.Err)]
		if e.Copies, e.Resolved = g.copies, g.resolved; f.match(e) {
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
