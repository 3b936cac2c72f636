package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
)

func TestRender(t *testing.T) {
	rec, err := dlq.FromMessage(dlq.Record{
		Key: []byte("m-1"), Value: []byte("\xff\xfe"), OriginalTopic: "t", Class: dlq.ClassInvalid,
		Message: "bad\nvalue\there", ReplayCount: 2,
	}.KafkaMessage())
	if err != nil {
		t.Fatal(err)
	}
	e := dlq.Entry{Record: rec, Merchant: "m-1", Copies: 2}
	e.Partition, e.Offset, e.Time = 1, 7, time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

	var buf bytes.Buffer
	if err := writeListLine(&buf, e); err != nil {
		t.Fatal(err)
	}
	want := "1/7\t2026-11-29T07:00:00.000Z\t2\t-\tm-1\tinvalid\t2\tbad value here\n"
	if buf.String() != want {
		t.Errorf("list line %q, want %q", buf.String(), want)
	}

	v := viewEntry(e)
	if v.Value != nil || !bytes.Equal(v.ValueBase64, []byte("\xff\xfe")) || *v.Key != "m-1" || v.Copies != 2 {
		t.Errorf("view of a binary value: %+v", v)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}

	st := dlq.Step{Entry: e, Action: dlq.ActionSend, Message: kafka.Message{Topic: "t", Partition: -1, Key: []byte("m 1"), Value: []byte(`{"a":1}`),
		Headers: []kafka.Header{{Key: dlq.HeaderReplayCount, Value: []byte("3")}}}}
	buf.Reset()
	if err := writePlanned(&buf, st); err != nil {
		t.Fatal(err)
	}
	if want := `1/7 -> t partition by key key="m 1" replay.count=3 value={"a":1}` + "\n"; buf.String() != want {
		t.Errorf("planned %q, want %q", buf.String(), want)
	}
}

func TestSummaryText(t *testing.T) {
	s := &dlq.Summary{Topic: "d", Total: 7, Copies: 1, Partitions: []dlq.Range{{Partition: 0, To: 4}, {Partition: 1, To: 4}},
		ByClass: map[dlq.Class]int{dlq.ClassConflict: 2, dlq.ClassExhausted: 5}, ByTopic: map[string]int{"orig": 7},
		ByMerchant: map[string]int{"m-1": 3, "m-2": 2, "m-3": 1, "m-4": 1}, Oldest: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	if err := writeSummary(&buf, s, 2); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"7 message(s) (1 more record(s) are copies)", "conflict", "exhausted", "orig", "m-1", "m-2", "... 2 more", "oldest 2026-11-29T07:00:00Z", "1:[0,4)"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary text lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "m-1") > strings.Index(text, "m-2") {
		t.Errorf("merchants not by count:\n%s", text)
	}
}

func TestJSONList(t *testing.T) {
	for _, list := range []bool{true, false} {
		var buf bytes.Buffer
		j := newJSONList(&buf, list)
		for i := range 2 {
			if err := j.add(dlq.Entry{Record: dlq.Record{Offset: int64(i), Value: []byte("v")}, Copies: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.close(&dlq.Summary{Total: 2}); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Records []entryView  `json:"records"`
			Summary *dlq.Summary `json:"summary"`
		}
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.Summary == nil || doc.Summary.Total != 2 {
			t.Fatalf("list=%v: %v\n%s", list, err, buf.String())
		}
		if want := map[bool]int{true: 2, false: 0}[list]; len(doc.Records) != want {
			t.Errorf("list=%v: %d records, want %d", list, len(doc.Records), want)
		}
	}
}

func TestProgressObserverPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := &progressObserver{w: &buf}
	p.Begin(3)
	p.Step(dlq.Step{Action: dlq.ActionSend})
	p.Step(dlq.Step{Action: dlq.ActionRefuse})
	p.Acked(1)
	p.Step(dlq.Step{Action: dlq.ActionSkip})
	p.finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"replay: 3 DLQ offset(s) to examine", "replay: examined 2/3, sent 1, refused 1", "replay: examined 3/3, sent 1, refused 1"}
	if !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
}

func TestProgressObserverBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progressObserver{w: &buf, terminal: true}
	p.Begin(2)
	p.Step(dlq.Step{Action: dlq.ActionSend})
	p.Acked(1)
	p.Step(dlq.Step{Action: dlq.ActionSend})
	p.Acked(2)
	p.finish()
	if !strings.Contains(buf.String(), "replay") || !strings.Contains(buf.String(), "2/2") {
		t.Errorf("bar output %q", buf.String())
	}
}

var filterNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseTimeBound(t *testing.T) {
	tests := []struct {
		spec     string
		at       time.Time
		wantSpec string
		err      bool
	}{
		{"", time.Time{}, "", false},
		{"2026-11-29T07:00:00Z", time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), "2026-11-29T07:00:00Z", false},
		{"2026-11-29T08:00:00+01:00", time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), "2026-11-29T07:00:00Z", false},
		{"2026-11-29T07:00:00.5Z", time.Date(2026, 11, 29, 7, 0, 0, 5e8, time.UTC), "2026-11-29T07:00:00.5Z", false},
		{"90m", filterNow.Add(-90 * time.Minute), "90m", false},
		{" 2h ", filterNow.Add(-2 * time.Hour), "2h", false},
		{"7d", filterNow.Add(-7 * 24 * time.Hour), "7d", false},
		{"0s", filterNow, "0s", false},
		{"-1h", time.Time{}, "", true},
		{"yesterday", time.Time{}, "", true},
		{"2026-11-29", time.Time{}, "", true},
		{"xd", time.Time{}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			b, err := parseTimeBound(tt.spec, filterNow)
			if tt.err {
				if !errors.Is(err, errBadTime) {
					t.Fatalf("err %v, want errBadTime", err)
				}
				return
			}
			if err != nil || !b.At.Equal(tt.at) || b.Spec != tt.wantSpec {
				t.Fatalf("got %+v %v, want at %v spec %q", b, err, tt.at, tt.wantSpec)
			}
		})
	}
}

func TestParseFilterClasses(t *testing.T) {
	f, err := parseFilter(" invalid, conflict ,,exhausted", "", "", "", "", "", "0,2", -1, -1, filterNow)
	if err != nil || !slices.Equal(f.Classes, []dlq.Class{dlq.ClassInvalid, dlq.ClassConflict, dlq.ClassExhausted}) || !slices.Equal(f.ReplayCounts, []int{0, 2}) {
		t.Fatalf("got %v %v", f.Classes, err)
	}
	if _, err := parseFilter("invalid,oops", "", "", "", "", "", "x", -1, -1, filterNow); err == nil || !strings.Contains(err.Error(), `"oops"`) ||
		!strings.Contains(err.Error(), "--replay-count") {
		t.Fatalf("err %v", err)
	}
}
