package dlq

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestInspect(t *testing.T) {
	dead := func(key, value string) kafka.Message {
		m := Record{Key: []byte(key), Value: []byte(value), OriginalTopic: "t", Class: ClassInvalid}.KafkaMessage()
		if key == "" {
			m.Key = nil
		}
		return m
	}
	tests := []struct {
		name              string
		m                 kafka.Message
		eventID, merchant string
		unreadable        bool
	}{
		{"valid", dead("m-1", validValue("evt-1", "m-1", 3)), "evt-1", "m-1", false},
		{"valid without key", dead("", validValue("evt-1", "m-1", 3)), "evt-1", "m-1", false},
		{"key mismatch: merchant is the key", dead("m-2", validValue("evt-1", "m-1", 3)), "evt-1", "m-2", false},
		{"invalid field, id still readable", dead("m-3", `{"event_id":"evt-7","amount":-1}`), "evt-7", "m-3", false},
		{"id not well formed", dead("m-3", `{"event_id":"{evt}"}`), "", "m-3", false},
		{"not JSON, no key", dead("", "\x00\x01"), "", UnknownMerchant, false},
		{"no dead-letter headers", kafka.Message{Key: []byte("m-5"), Value: []byte("x")}, "", "m-5", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := inspect(tt.m)
			if e.EventID != tt.eventID || e.Merchant != tt.merchant || (e.Err != nil) != tt.unreadable {
				t.Fatalf("got event %q merchant %q err %v", e.EventID, e.Merchant, e.Err)
			}
			if tt.unreadable && !errors.Is(e.Err, ErrNotRecord) {
				t.Fatalf("err %v", e.Err)
			}
		})
	}
}
