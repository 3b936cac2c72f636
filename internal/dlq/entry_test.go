package dlq

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

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
			e := Inspect(tt.m)
			if e.EventID != tt.eventID || e.Merchant != tt.merchant || (e.Err != nil) != tt.unreadable {
				t.Fatalf("got event %q merchant %q err %v", e.EventID, e.Merchant, e.Err)
			}
			if tt.unreadable && !errors.Is(e.Err, ErrNotRecord) {
				t.Fatalf("err %v", e.Err)
			}
		})
	}
}

func TestRender(t *testing.T) {
	e := Inspect(Record{
		Key: []byte("m-1"), Value: []byte("\xff\xfe"), OriginalTopic: "t", Class: ClassInvalid,
		Message: "bad\nvalue\there", ReplayCount: 2,
	}.KafkaMessage())
	e.Partition, e.Offset, e.Time = 1, 7, time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

	var buf bytes.Buffer
	if err := WriteListLine(&buf, e); err != nil {
		t.Fatal(err)
	}
	want := "1/7\t2026-11-29T07:00:00.000Z\t-\tm-1\tinvalid\t2\tbad value here\n"
	if buf.String() != want {
		t.Errorf("list line %q, want %q", buf.String(), want)
	}

	v := e.View()
	if v.Value != nil || !bytes.Equal(v.ValueBase64, []byte("\xff\xfe")) || *v.Key != "m-1" {
		t.Errorf("view of a binary value: %+v", v)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}

	st := Step{Entry: e, Action: ActionSend, Message: kafka.Message{Topic: "t", Partition: -1, Key: []byte("m 1"), Value: []byte(`{"a":1}`),
		Headers: []kafka.Header{{Key: HeaderReplayCount, Value: []byte("3")}}}}
	buf.Reset()
	if err := WritePlanned(&buf, st); err != nil {
		t.Fatal(err)
	}
	if want := `1/7 -> t partition by key key="m 1" replay.count=3 value={"a":1}` + "\n"; buf.String() != want {
		t.Errorf("planned %q, want %q", buf.String(), want)
	}
}

func TestProgressObserverPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgressObserver(&buf, false)
	p.Interval = 0
	p.Begin(3)
	p.Step(Step{Action: ActionSend})
	p.Step(Step{Action: ActionRefuse})
	p.Acked(1)
	p.Step(Step{Action: ActionSkip})
	p.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"replay: 3 DLQ offset(s) to examine", "replay: examined 2/3, sent 1, refused 1", "replay: examined 3/3, sent 1, refused 1"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
}

func TestProgressObserverBar(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgressObserver(&buf, true)
	p.Begin(2)
	p.Step(Step{Action: ActionSend})
	p.Acked(1)
	p.Step(Step{Action: ActionSend})
	p.Acked(2)
	p.Finish()
	if !strings.Contains(buf.String(), "replay") || !strings.Contains(buf.String(), "2/2") {
		t.Errorf("bar output %q", buf.String())
	}
}
