package dlq

import (
	"slices"
	"strconv"

	"github.com/segmentio/kafka-go"
)

// replayMessage is what a replay sends for a record: the original key, value
// and headers, to the original topic and partition (or toTopic, partition by
// key), plus replay.job_id and replay.count = the record's count + 1.
func replayMessage(rec Record, jobID, toTopic, dlqTopic string) (kafka.Message, error) {
	m := kafka.Message{Topic: rec.OriginalTopic, Partition: rec.OriginalPartition, Key: rec.Key, Value: rec.Value}
	if toTopic != "" && toTopic != rec.OriginalTopic {
		m.Topic, m.Partition = toTopic, -1
	}
	if m.Topic == "" || m.Topic == dlqTopic {
		return kafka.Message{}, ErrNoTarget
	}
	m.Headers = make([]kafka.Header, 0, len(rec.Headers)+2)
	for _, h := range rec.Headers {
		if h.Key != HeaderReplayCount && h.Key != HeaderReplayJob {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: slices.Clone(h.Value)})
		}
	}
	m.Headers = append(m.Headers,
		kafka.Header{Key: HeaderReplayJob, Value: []byte(jobID)},
		kafka.Header{Key: HeaderReplayCount, Value: []byte(strconv.Itoa(rec.ReplayCount + 1))},
	)
	return m, nil
}

// originalPartition sends a message with a Partition the topic has to that
// partition, and any other (Partition -1) by the fallback, a key hash.
// kafka-go's Writer ignores Message.Partition but hands it to the balancer.
type originalPartition struct{ fallback kafka.Balancer }

func (b originalPartition) Balance(m kafka.Message, partitions ...int) int {
	if m.Partition >= 0 && slices.Contains(partitions, m.Partition) {
		return m.Partition
	}
	return b.fallback.Balance(m, partitions...)
}
