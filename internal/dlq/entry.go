package dlq

import (
	"cmp"
	"encoding/json"
	"fmt"

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

// identity is what makes records one message: the provenance, or for a
// message that is not a record its place in the DLQ.
func identity(r Record, err error) string {
	if err != nil {
		return fmt.Sprintf("dlq@%d/%d", r.Partition, r.Offset)
	}
	return r.Provenance()
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
