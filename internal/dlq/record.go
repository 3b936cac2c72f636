package dlq

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Class is the reason a message was dead-lettered.
type Class string

// The error classes.
const (
	ClassInvalid   Class = "invalid"   // undecodable or breaks the event contract
	ClassConflict  Class = "conflict"  // same event_id seen with another merchant or amount
	ClassRefused   Class = "refused"   // a value the database refuses
	ClassExhausted Class = "exhausted" // failed alone too many times
)

// Header names. Replay headers ride on the replayed message so that, if it
// fails again, the new dead-letter record carries a raised replay count.
const (
	HeaderOriginalTopic     = "dlq.original_topic"
	HeaderOriginalKey       = "dlq.original_key" // absent when the original key was null
	HeaderOriginalPartition = "dlq.original_partition"
	HeaderOriginalOffset    = "dlq.original_offset"
	HeaderOriginalTime      = "dlq.original_timestamp"
	HeaderGroup             = "dlq.consumer_group"
	HeaderErrorClass        = "dlq.error_class"
	HeaderErrorMessage      = "dlq.error_message"
	HeaderAttempts          = "dlq.attempts"
	HeaderFirstFailure      = "dlq.first_failure"
	HeaderLastFailure       = "dlq.last_failure"
	HeaderReplayCount       = "replay.count"
	HeaderReplayJob         = "replay.job_id"
	HeaderReplayOrigin      = "replay.origin" // the provenance of the first dead-lettering
	// HeaderResolved (its time) makes a DLQ message a resolution mark: keyed
	// by the message it resolves, its value the operator's note.
	HeaderResolved = "dlq.resolved"
)

const timeLayout = time.RFC3339Nano

// maxMessageLen bounds the error message kept in a header.
const maxMessageLen = 1024

// Record is one dead-lettered message. In the topic its key is its
// provenance, so copies of one message share a partition and compaction
// keeps one of them.
type Record struct {
	Key               []byte         `json:"-"` // the original message's
	Value             []byte         `json:"-"`
	OriginalTopic     string         `json:"original_topic"`
	OriginalPartition int            `json:"original_partition"`
	OriginalOffset    int64          `json:"original_offset"`
	OriginalTime      time.Time      `json:"-"`
	Group             string         `json:"consumer_group,omitempty"`
	Class             Class          `json:"error_class"`
	Message           string         `json:"error_message"`
	Attempts          int            `json:"attempts"`
	FirstFailure      time.Time      `json:"first_failure,omitzero"`
	LastFailure       time.Time      `json:"last_failure,omitzero"`
	ReplayCount       int            `json:"replay_count"`         // how many times this payload was replayed before it failed again
	ReplayJob         string         `json:"replay_job,omitempty"` // the replay job that last sent it, if any
	Origin            string         `json:"origin,omitempty"`     // a replayed message's first provenance
	Headers           []kafka.Header `json:"-"`                    // the original message's other headers

	// Where the record sits in the DLQ topic; set by FromMessage.
	Partition int       `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time,omitzero"`
}

// FromFailure builds the record for a message that failed. Replay headers on
// the original message are carried over.
func FromFailure(m kafka.Message, group string, class Class, cause error, attempts int, first, last time.Time) Record {
	r := Record{
		Key: m.Key, Value: m.Value,
		OriginalTopic: m.Topic, OriginalPartition: m.Partition, OriginalOffset: m.Offset, OriginalTime: m.Time,
		Group: group, Class: class, Attempts: attempts, FirstFailure: first, LastFailure: last,
	}
	if cause != nil {
		r.Message = cause.Error()
	}
	for _, h := range m.Headers {
		switch h.Key {
		case HeaderReplayCount:
			r.ReplayCount, _ = strconv.Atoi(string(h.Value))
		case HeaderReplayJob:
			r.ReplayJob = string(h.Value)
		case HeaderReplayOrigin:
			r.Origin = string(h.Value)
		default:
			if !strings.HasPrefix(h.Key, "dlq.") {
				r.Headers = append(r.Headers, h)
			}
		}
	}
	return r
}

// Provenance is where the message was consumed: "<topic>/<partition>/<offset>".
// Records with one provenance are copies of one dead-lettering.
func (r Record) Provenance() string {
	return r.OriginalTopic + "/" + strconv.Itoa(r.OriginalPartition) + "/" + strconv.FormatInt(r.OriginalOffset, 10)
}

// Root is the provenance of the message's first dead-lettering: a replayed
// message that failed again is a copy of its original.
func (r Record) Root() string { return cmp.Or(r.Origin, r.Provenance()) }

// fields are the record's headers, in the order they are written.
func (r *Record) fields() []field {
	return []field{{HeaderOriginalTopic, &r.OriginalTopic}, {HeaderOriginalPartition, &r.OriginalPartition},
		{HeaderOriginalOffset, &r.OriginalOffset}, {HeaderOriginalTime, &r.OriginalTime}, {HeaderGroup, &r.Group},
		{HeaderErrorClass, &r.Class}, {HeaderErrorMessage, &r.Message}, {HeaderAttempts, &r.Attempts},
		{HeaderFirstFailure, &r.FirstFailure}, {HeaderLastFailure, &r.LastFailure},
		{HeaderReplayCount, &r.ReplayCount}, {HeaderReplayJob, &r.ReplayJob}, {HeaderReplayOrigin, &r.Origin}}
}

type field struct {
	name string
	p    any // *string, *Class, *int, *int64 or *time.Time
}

func (f field) String() string {
	switch p := f.p.(type) {
	case *string:
		return *p
	case *Class:
		return string(*p)
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *time.Time:
		if p.IsZero() {
			return ""
		}
		return p.UTC().Format(timeLayout)
	}
	panic("dlq: field type")
}

func (f field) set(v string) (err error) {
	switch p := f.p.(type) {
	case *string:
		*p = v
	case *Class:
		*p = Class(v)
	case *int:
		*p, err = strconv.Atoi(v)
	case *int64:
		*p, err = strconv.ParseInt(v, 10, 64)
	case *time.Time:
		if v != "" {
			*p, err = time.Parse(timeLayout, v)
		}
	}
	return err
}

// KafkaMessage renders the record for the DLQ topic (Topic left to the
// writer), keyed by its root, so a replay's copies join their original.
func (r Record) KafkaMessage() kafka.Message {
	r.Message = r.Message[:min(len(r.Message), maxMessageLen)]
	h := append([]kafka.Header(nil), r.Headers...)
	if r.Key != nil {
		h = append(h, kafka.Header{Key: HeaderOriginalKey, Value: r.Key})
	}
	for _, f := range r.fields() {
		if v := f.String(); v != "" || (f.name != HeaderReplayJob && f.name != HeaderReplayOrigin) {
			h = append(h, kafka.Header{Key: f.name, Value: []byte(v)})
		}
	}
	return kafka.Message{Key: []byte(r.Root()), Value: r.Value, Headers: h}
}

// ErrNotRecord marks a DLQ message without the headers this package writes.
var ErrNotRecord = errors.New("dlq: not a dead-letter record")

// FromMessage parses a message read from the DLQ topic.
func FromMessage(m kafka.Message) (Record, error) {
	r := Record{Value: m.Value, Partition: m.Partition, Offset: m.Offset, Time: m.Time}
	var key []byte
	var errs []error
	fields := map[string]field{}
	for _, f := range r.fields() {
		fields[f.name] = f
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		seen[h.Key] = true
		if f, ok := fields[h.Key]; ok {
			if err := f.set(string(h.Value)); err != nil {
				errs = append(errs, fmt.Errorf("header %s=%q: %w", h.Key, h.Value, err))
			}
		} else if h.Key == HeaderOriginalKey {
			key = h.Value
		} else {
			r.Headers = append(r.Headers, h)
		}
	}
	for _, k := range []string{HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset, HeaderErrorClass} {
		if !seen[k] {
			errs = append(errs, fmt.Errorf("header %s missing", k))
		}
	}
	// Records written before provenance keys carry the original key as theirs.
	r.Key = m.Key
	if len(errs) > 0 {
		return r, fmt.Errorf("%w at partition %d offset %d: %w", ErrNotRecord, m.Partition, m.Offset, errors.Join(errs...))
	}
	if k := string(m.Key); k == r.Provenance() || k == r.Root() {
		r.Key = key
	}
	return r, nil
}
