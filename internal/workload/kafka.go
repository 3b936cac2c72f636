package workload

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

// MessageWriter is the part of *kafka.Writer that ProduceOnSchedule uses.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// NewKafkaWriter returns a writer tuned for bulk production: the key
// (merchant id) picks the partition with kafka.Hash, so a merchant's events
// stay in order on one partition; every write waits for all in-sync replicas;
// batches of up to 1000 messages or 1 MiB leave after at most 5 ms, so a
// synchronous caller is never held back by kafka-go's one-second default linger. transport may be nil (kafka-go's default).
func NewKafkaWriter(brokers []string, topic string, transport *kafka.Transport) *kafka.Writer {
	w := &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchSize:              1000,
		BatchBytes:             1 << 20,
		BatchTimeout:           5 * time.Millisecond,
		WriteTimeout:           30 * time.Second,
		MaxAttempts:            10,
		AllowAutoTopicCreation: true,
	}
	if transport != nil {
		w.Transport = transport
	}
	return w
}
