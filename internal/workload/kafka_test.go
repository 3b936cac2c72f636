package workload

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/testenv"
)

func TestProduceToKafka(t *testing.T) {
	k := testenv.NewKafka(t)
	topic := k.Topic(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := Config{Seed: 42, Merchants: 30, Skew: Skew{Kind: Hot, Param: 0.2}, Duplicates: 0.05, Malformed: 0.05}
	const total = 2500
	want, err := Generate(cfg, total)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	transport := &kafka.Transport{}
	w := NewKafkaWriter(k.Brokers, topic, transport)
	var reports int
	st, err := ProduceOnSchedule(ctx, Writers{Payments: w}, g, total, true, func(ScheduleStats) { reports++ })
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	transport.CloseIdleConnections()
	if err != nil {
		t.Fatal(err)
	}
	if wantSum := Summarize(want); st.Summary.Messages != total || !reflect.DeepEqual(st.Summary, wantSum) {
		t.Fatalf("stats %+v, want %d messages like %+v", st.Summary, total, Summarize(want))
	}
	if reports == 0 {
		t.Error("OnProgress never called")
	}

	got := k.ReadAll(ctx, t, topic, 4)
	if len(got) != total {
		t.Fatalf("read back %d messages, want %d", len(got), total)
	}
	partitionOf := map[string]int{}
	perKey := map[string]int{}
	for _, m := range got {
		if p, ok := partitionOf[string(m.Key)]; ok && p != m.Partition {
			t.Fatalf("key %s on partitions %d and %d", m.Key, p, m.Partition)
		}
		partitionOf[string(m.Key)] = m.Partition
		perKey[string(m.Key)]++
	}
	wantPerKey := map[string]int{}
	for _, m := range want {
		wantPerKey[string(m.Key)]++
	}
	for key, n := range wantPerKey {
		if perKey[key] != n {
			t.Errorf("key %s: %d messages read back, %d generated", key, perKey[key], n)
		}
	}
	// Within a partition, messages keep the generation order (bytes that occur
	// once in the stream identify their message; duplicated ones are skipped).
	seqOf := map[string]int{}
	copies := map[string]int{}
	for i, m := range want {
		seqOf[string(m.Value)] = i
		copies[string(m.Value)]++
	}
	last := map[int]int{}
	for _, m := range got {
		if copies[string(m.Value)] > 1 {
			continue
		}
		seq := seqOf[string(m.Value)]
		if prev, ok := last[m.Partition]; ok && seq < prev {
			t.Fatalf("partition %d: seq %d after %d", m.Partition, seq, prev)
		}
		last[m.Partition] = seq
	}
}

func TestProduceRateAndCancel(t *testing.T) {
	g, err := New(Config{Seed: 1, Start: time.Now(), Step: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var w countingWriter
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Unbounded at 1000 msg/s until the deadline: it stops with the context
	// and counts only what was written.
	st, err := ProduceOnSchedule(ctx, Writers{Payments: &w}, g, 0, false, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if st.Summary.Messages != w.n || w.n == 0 || w.n > 1000 {
		t.Fatalf("counted %d, written %d: want equal and paced well below 1000 in 0.3s", st.Summary.Messages, w.n)
	}
	if w.largest > 50 {
		t.Fatalf("chunks of %d at 1000/s: pacing would be lumpy", w.largest)
	}
}

type countingWriter struct{ n, largest int }

func (w *countingWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.n += len(msgs)
	w.largest = max(w.largest, len(msgs))
	return nil
}
