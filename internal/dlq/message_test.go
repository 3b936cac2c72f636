package dlq

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestReplayMessage(t *testing.T) {
	rec := Record{
		Key: []byte("m-1"), Value: []byte("v"), OriginalTopic: "payment.succeeded", OriginalPartition: 4,
		ReplayCount: 2, ReplayJob: "old", Headers: []kafka.Header{{Key: "trace", Value: []byte("t")}, {Key: "b", Value: nil}},
	}
	tests := []struct {
		name, to  string
		topic     string
		partition int
		err       error
	}{
		{"original", "", "payment.succeeded", 4, nil},
		{"to the original by name", "payment.succeeded", "payment.succeeded", 4, nil},
		{"elsewhere by key", "staging", "staging", -1, nil},
		{"never into the DLQ", "", "", 0, ErrNoTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dlqTopic := "payment.succeeded.dlq"
			r := rec
			if tt.err != nil {
				r.OriginalTopic = dlqTopic
			}
			m, err := replayMessage(r, "job-9", tt.to, dlqTopic)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if m.Topic != tt.topic || m.Partition != tt.partition || string(m.Key) != "m-1" || string(m.Value) != "v" {
				t.Fatalf("message %+v", m)
			}
			want := []kafka.Header{{Key: "trace", Value: []byte("t")}, {Key: "b", Value: []byte{}}, {Key: HeaderReplayJob, Value: []byte("job-9")}, {Key: HeaderReplayCount, Value: []byte("3")}, {Key: HeaderReplayOrigin, Value: []byte(rec.Provenance())}}
			if !slices.EqualFunc(m.Headers, want, func(a, b kafka.Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
				t.Fatalf("headers %v, want %v", m.Headers, want)
			}
		})
	}
}

// What the worker does with a replayed message that fails again: FromFailure
// reads replay.count and replay.job_id from the message, so the new record
// carries the raised count, and the next replay raises it once more.
func TestFromFailureCarriesReplayCount(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	rec := Record{Key: []byte("m-1"), Value: []byte("v"), OriginalTopic: "t", OriginalPartition: 1,
		Headers: []kafka.Header{{Key: "trace", Value: []byte("x")}}}
	for want := 1; want <= 4; want++ {
		m, err := replayMessage(rec, "job-a", "", "t.dlq")
		if err != nil {
			t.Fatal(err)
		}
		m.Offset = int64(100 + want)
		// A stale dead-letter header on the consumed message is not carried.
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderErrorClass, Value: []byte("stale")})
		failed := FromFailure(m, "billing-worker", ClassRefused, errors.New("again"), 1, at, at)
		if failed.ReplayCount != want || failed.ReplayJob != "job-a" {
			t.Fatalf("round %d: count %d job %q", want, failed.ReplayCount, failed.ReplayJob)
		}
		if len(failed.Headers) != 1 || failed.Headers[0].Key != "trace" {
			t.Fatalf("round %d: headers %v", want, failed.Headers)
		}
		// Through the DLQ topic and back.
		dm := failed.KafkaMessage()
		dm.Partition, dm.Offset = 0, int64(want)
		rec, err = FromMessage(dm)
		if err != nil || rec.ReplayCount != want || rec.OriginalOffset != int64(100+want) || rec.Class != ClassRefused {
			t.Fatalf("round %d: read back %+v %v", want, rec, err)
		}
	}
}

func TestOriginalPartitionBalancer(t *testing.T) {
	b := originalPartition{fallback: &kafka.Hash{}}
	ps := []int{0, 1, 2}
	if got := b.Balance(kafka.Message{Partition: 2, Key: []byte("k")}, ps...); got != 2 {
		t.Errorf("explicit partition: %d", got)
	}
	h := (&kafka.Hash{}).Balance(kafka.Message{Key: []byte("k")}, ps...)
	for _, p := range []int{-1, 7} {
		if got := b.Balance(kafka.Message{Partition: p, Key: []byte("k")}, ps...); got != h {
			t.Errorf("partition %d: %d, want the key hash %d", p, got, h)
		}
	}
}
