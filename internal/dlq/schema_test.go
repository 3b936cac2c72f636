package dlq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/schemas"
)

// The records the worker writes hold against the schema of their headers,
// whatever the original message carried, and are keyed by provenance.
func TestRecordHeadersHoldAgainstTheSchema(t *testing.T) {
	s := schemas.MustCompile(schemas.DeadLetterHeaders)
	at := time.Date(2026, 11, 29, 7, 0, 0, 123000000, time.UTC)
	plain := kafka.Message{Topic: "payment.succeeded", Partition: 2, Offset: 41, Time: at, Key: []byte("m-1"), Value: []byte(`{"broken"`)}
	replayed := plain
	replayed.Key, replayed.Time = nil, time.Time{} // no key, no timestamp
	replayed.Headers = []kafka.Header{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		{Key: HeaderReplayCount, Value: []byte("2")}, {Key: HeaderReplayJob, Value: []byte("job-7")}, {Key: HeaderErrorClass, Value: []byte("stale")}}
	for _, tt := range []struct {
		name  string
		rec   Record
		wrong bool
	}{
		{"invalid", FromFailure(plain, "billing-worker", ClassInvalid, errors.New("event: invalid amount"), 1, at, at), false},
		{"exhausted, replayed", FromFailure(replayed, "billing-worker.grants", ClassExhausted, errors.New(strings.Repeat("é", 2000)), 5, at, at.Add(time.Minute)), false},
		{"conflict", FromFailure(plain, "billing-worker", ClassConflict, errors.New("conflict"), 1, at, at), false},
		{"refused", FromFailure(plain, "billing-worker", ClassRefused, errors.New("refused"), 1, at, at), false},
		{"a class nobody writes", FromFailure(plain, "billing-worker", "lost", nil, 1, at, at), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.rec.KafkaMessage()
			headers := map[string]string{}
			for _, h := range m.Headers {
				if _, twice := headers[h.Key]; twice {
					t.Fatalf("header %s written twice", h.Key)
				}
				headers[h.Key] = string(h.Value)
			}
			doc, err := json.Marshal(headers)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(doc); (err != nil) != tt.wrong {
				t.Fatalf("%s: refused %v, want %v: %v", doc, err != nil, tt.wrong, err)
			}
			if string(m.Key) != tt.rec.Provenance() || string(m.Value) != string(tt.rec.Value) {
				t.Fatalf("key %q value %q: want the provenance and the original value", m.Key, m.Value)
			}
		})
	}
}
