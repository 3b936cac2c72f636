package dlq

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 0, 0, 123000000, time.UTC)
	orig := kafka.Message{
		Topic: "payment.succeeded", Partition: 2, Offset: 41, Time: at,
		Key: []byte("m-1"), Value: []byte(`{"broken"`),
		Headers: []kafka.Header{{Key: "trace", Value: []byte("abc")}, {Key: HeaderReplayCount, Value: []byte("2")}, {Key: HeaderReplayJob, Value: []byte("job-7")}},
	}
	rec := FromFailure(orig, "billing-worker", ClassInvalid, errors.New("event: invalid amount"), 1, at, at.Add(time.Second))
	if rec.ReplayCount != 2 || rec.ReplayJob != "job-7" {
		t.Fatalf("replay headers not carried: %+v", rec)
	}
	msg := rec.KafkaMessage()
	if string(msg.Key) != "payment.succeeded/2/41" {
		t.Fatalf("key %q, want the provenance", msg.Key)
	}
	msg.Partition, msg.Offset, msg.Time = 0, 9, at
	got, err := FromMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := rec
	want.Partition, want.Offset, want.Time = 0, 9, at
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

// A null original key stays null; a record written before provenance keys
// (keyed by the original key, without dlq.original_key) reads as it did.
func TestRecordKeys(t *testing.T) {
	rec := Record{Value: []byte("v"), OriginalTopic: "t", OriginalPartition: 1, OriginalOffset: 2, Class: ClassInvalid}
	got, err := FromMessage(rec.KafkaMessage())
	if err != nil || got.Key != nil {
		t.Fatalf("null key: %q %v", got.Key, err)
	}
	old := rec.KafkaMessage()
	old.Key = []byte("m-1")
	if got, err = FromMessage(old); err != nil || string(got.Key) != "m-1" || got.Provenance() != "t/1/2" {
		t.Fatalf("old record: key %q provenance %q %v", got.Key, got.Provenance(), err)
	}
}

func TestFromMessageRejectsForeign(t *testing.T) {
	_, err := FromMessage(kafka.Message{Value: []byte("x"), Headers: []kafka.Header{{Key: HeaderOriginalOffset, Value: []byte("nan")}}})
	if !errors.Is(err, ErrNotRecord) {
		t.Fatalf("err = %v, want ErrNotRecord", err)
	}
}
