package dlq

import (
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
)

const timeLayout = time.RFC3339Nano

// maxMessageLen bounds the error message kept in a header.
const maxMessageLen = 1024

// Record is one dead-lettered message. In the topic its key is its
// provenance, so copies of one message share a partition and compaction
// keeps one of them.
type Record struct {
	Key, Value        []byte // the original message's
	OriginalTopic     string
	OriginalPartition int
	OriginalOffset    int64
	OriginalTime      time.Time
	Group             string
	Class             Class
	Message           string
	Attempts          int
	FirstFailure      time.Time
	LastFailure       time.Time
	ReplayCount       int            // how many times this payload was replayed before it failed again
	ReplayJob         string         // the replay job that last sent it, if any
	Headers           []kafka.Header // the original message's other headers

	// Where the record sits in the DLQ topic; set by FromMessage.
	Partition int
	Offset    int64
	Time      time.Time
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

// KafkaMessage renders the record for the DLQ topic (Topic left to the
// writer), keyed by its provenance.
func (r Record) KafkaMessage() kafka.Message {
	msg := r.Message
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen]
	}
	h := append([]kafka.Header(nil), r.Headers...)
	add := func(k, v string) { h = append(h, kafka.Header{Key: k, Value: []byte(v)}) }
	if r.Key != nil {
		h = append(h, kafka.Header{Key: HeaderOriginalKey, Value: r.Key})
	}
	add(HeaderOriginalTopic, r.OriginalTopic)
	add(HeaderOriginalPartition, strconv.Itoa(r.OriginalPartition))
	add(HeaderOriginalOffset, strconv.FormatInt(r.OriginalOffset, 10))
	add(HeaderOriginalTime, formatTime(r.OriginalTime))
	add(HeaderGroup, r.Group)
	add(HeaderErrorClass, string(r.Class))
	add(HeaderErrorMessage, msg)
	add(HeaderAttempts, strconv.Itoa(r.Attempts))
	add(HeaderFirstFailure, formatTime(r.FirstFailure))
	add(HeaderLastFailure, formatTime(r.LastFailure))
	add(HeaderReplayCount, strconv.Itoa(r.ReplayCount))
	if r.ReplayJob != "" {
		add(HeaderReplayJob, r.ReplayJob)
	}
	return kafka.Message{Key: []byte(r.Provenance()), Value: r.Value, Headers: h}
}

// ErrNotRecord marks a DLQ message without the headers this package writes.
var ErrNotRecord = errors.New("dlq: not a dead-letter record")

// FromMessage parses a message read from the DLQ topic.
func FromMessage(m kafka.Message) (Record, error) {
	r := Record{Value: m.Value, Partition: m.Partition, Offset: m.Offset, Time: m.Time}
	var key []byte
	var errs []error
	seen := map[string]bool{}
	for _, h := range m.Headers {
		v := string(h.Value)
		seen[h.Key] = true
		var err error
		switch h.Key {
		case HeaderOriginalKey:
			key = h.Value
		case HeaderOriginalTopic:
			r.OriginalTopic = v
		case HeaderOriginalPartition:
			r.OriginalPartition, err = strconv.Atoi(v)
		case HeaderOriginalOffset:
			r.OriginalOffset, err = strconv.ParseInt(v, 10, 64)
		case HeaderOriginalTime:
			r.OriginalTime, err = parseTime(v)
		case HeaderGroup:
			r.Group = v
		case HeaderErrorClass:
			r.Class = Class(v)
		case HeaderErrorMessage:
			r.Message = v
		case HeaderAttempts:
			r.Attempts, err = strconv.Atoi(v)
		case HeaderFirstFailure:
			r.FirstFailure, err = parseTime(v)
		case HeaderLastFailure:
			r.LastFailure, err = parseTime(v)
		case HeaderReplayCount:
			r.ReplayCount, err = strconv.Atoi(v)
		case HeaderReplayJob:
			r.ReplayJob = v
		default:
			r.Headers = append(r.Headers, h)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s=%q: %w", h.Key, v, err))
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
	if string(m.Key) == r.Provenance() {
		r.Key = key
	}
	return r, nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeLayout, s)
}
