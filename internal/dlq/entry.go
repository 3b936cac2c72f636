package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
)

// UnknownMerchant stands for the merchant of a record whose value does not
// decode and whose message has no key.
const UnknownMerchant = "?"

// Entry is one message of the dead-letter topic as the operator sees it: the
// parsed record plus the event id and merchant read from its value.
type Entry struct {
	Record
	// EventID is the value's event_id; for a malformed value, its event_id
	// field when that is still a well-formed id, else "".
	EventID string `json:"event_id"`
	// Merchant is the value's merchant_id; for a malformed value, the message
	// key, else UnknownMerchant.
	Merchant string `json:"merchant"`
	// Err is set (wrapping ErrNotRecord) when the message lacks the dead-letter
	// headers: such a message is listed and counted, never replayed.
	Err error `json:"-"`
	// Copies is how many records of the topic carry this message (Summarize).
	Copies int `json:"copies"`
	// Resolved: an operator marked the message resolved (Trail; Summarize
	// and Replay leave such messages out).
	Resolved bool `json:"resolved"`
}

func inspect(m kafka.Message) Entry {
	rec, err := FromMessage(m)
	e := Entry{Record: rec, Err: err}
	if ev, derr := event.Decode(rec.Key, rec.Value); derr == nil {
		e.EventID, e.Merchant = ev.EventID, ev.MerchantID
		return e
	}
	e.EventID, e.Merchant = looseEventID(rec.Value), cmp.Or(string(rec.Key), UnknownMerchant)
	return e
}

// identity is what makes records one message: the root provenance, or for
// a message that is not a record its place in the DLQ.
func identity(r Record, err error) string {
	if err != nil {
		return fmt.Sprintf("dlq@%d/%d", r.Partition, r.Offset)
	}
	return r.Root()
}

// group is what the records of one message say together.
type group struct {
	copies   int  // records carrying it
	replays  int  // the highest replay count among them: the latest copy's
	resolved bool // an operator marked it resolved (Resolve)
}

func isMark(m kafka.Message) bool {
	return slices.ContainsFunc(m.Headers, func(h kafka.Header) bool { return h.Key == HeaderResolved })
}

// groups reads every record of topic to the high watermarks once, whatever
// f narrows later (a copy or a mark may sit anywhere in the topic), and
// returns the ranges f narrows them to with the records by message.
func (c *Client) groups(ctx context.Context, topic string, f Filter) ([]Range, map[string]*group, error) {
	all, err := c.watermarks(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	gs := map[string]*group{}
	at := func(id string) *group {
		if gs[id] == nil {
			gs[id] = &group{}
		}
		return gs[id]
	}
	err = c.scan(ctx, topic, all, func(m kafka.Message) error {
		if isMark(m) {
			at(string(m.Key)).resolved = true
			return nil
		}
		rec, err := FromMessage(m)
		g := at(identity(rec, err))
		g.copies, g.replays = g.copies+1, max(g.replays, rec.ReplayCount)
		return nil
	})
	return f.narrow(all), gs, err
}

// looseEventID digs the event_id out of a value that failed validation, so an
// operator can still select a malformed record by its event id.
func looseEventID(value []byte) string {
	var w struct {
		EventID string `json:"event_id"` // not a string: an error, so ""
	}
	if json.Unmarshal(value, &w) != nil || !event.ValidID(w.EventID) {
		return ""
	}
	return w.EventID
}
