package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// BenchmarkConsume measures messages/s from a kfake topic (4 partitions,
// 1000 keys) through the consumer with the default tuning and a no-op
// handler, commits included: b.N messages are produced first, then timed
// from Run's start until every one was handed to the handler.
//
//	go test -run '^$' -bench Consume -benchtime 200000x ./internal/consumer/
func BenchmarkConsume(b *testing.B) {
	c := newCluster(b)
	const parts = 4
	topic, dlqTopic := c.k.Topic(b, parts), c.k.Topic(b, 1)
	msgs, _ := events(b.N, 1000)
	c.produce(b, topic, msgs)

	var handled atomic.Int64
	h := handlerFunc(func(_ context.Context, items []Item[event]) ([]error, error) {
		handled.Add(int64(len(items)))
		return nil, nil
	})
	cfg := Config{Brokers: c.k.Brokers, Topic: topic, Group: "g-" + topic, DLQTopic: dlqTopic,
		LatencyBudget: 5 * time.Millisecond, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout: 2 * time.Second}
	b.ResetTimer()
	began := time.Now()
	r := start(b, cfg, h, nil)
	waitFor(b, 5*time.Minute, "all handled", func() bool { return handled.Load() >= int64(b.N) })
	elapsed := time.Since(began)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkDeadLetter measures messages/s through the consumer when every
// message is undecodable and so dead-lettered (a synchronous acks=all write
// per lane batch, each followed by a commit): b.N are produced first, then
// timed from Run's start until every one is dead-lettered.
//
//	go test -run '^$' -bench DeadLetter -benchtime 20000x ./internal/consumer/
func BenchmarkDeadLetter(b *testing.B) {
	c := newCluster(b)
	const parts = 4
	topic, dlqTopic := c.k.Topic(b, parts), c.k.Topic(b, 1)
	msgs := make([]kafka.Message, b.N)
	for i := range msgs {
		key := "k-" + itoa(i%64)
		msgs[i] = kafka.Message{Key: []byte(key), Value: []byte(key + ":poison-" + itoa(i))}
	}
	c.produce(b, topic, msgs)
	cfg := c.config(topic, dlqTopic)
	b.ResetTimer()
	began := time.Now()
	r := start(b, cfg, newRecorder().handler(0), nil)
	waitFor(b, 5*time.Minute, "all dead-lettered", func() bool { return value(b, r.m.dlqPublished) >= float64(b.N) })
	elapsed := time.Since(began)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}
