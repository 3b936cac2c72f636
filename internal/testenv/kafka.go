package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka is a Kafka-protocol broker for one test: the cluster named by
// KAFKA_BROKERS, or an in-process kfake cluster that speaks the real wire
// protocol over TCP on loopback.
type Kafka struct {
	Brokers []string
	Cluster *kfake.Cluster // the in-process broker, for fault injection; nil with KAFKA_BROKERS
}

// NewKafka returns a broker for t. An in-process one is closed when the test ends.
func NewKafka(t testing.TB, opts ...kfake.Opt) *Kafka {
	t.Helper()
	if env := os.Getenv("KAFKA_BROKERS"); env != "" {
		brokers := strings.Split(env, ",")
		conn, err := net.DialTimeout("tcp", brokers[0], 3*time.Second)
		if err != nil {
			unavailable(t, "Kafka (KAFKA_BROKERS)", err)
		}
		conn.Close()
		return &Kafka{Brokers: brokers}
	}
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		unavailable(t, "Kafka (in-process kfake)", err)
	}
	t.Cleanup(c.Close)
	return &Kafka{Brokers: c.ListenAddrs(), Cluster: c}
}

// FaultHooks returns the in-process broker, the only one that takes injected
// faults (see InProcess).
func (k *Kafka) FaultHooks(t testing.TB) *kfake.Cluster {
	t.Helper()
	return k.InProcess(t, "broker fault injection")
}

// InProcess returns the in-process broker, which the test needs for what. With
// KAFKA_BROKERS set there is none: the test is skipped, or fails under
// BILLING_REQUIRE_INTEGRATION=1.
func (k *Kafka) InProcess(t testing.TB, what string) *kfake.Cluster {
	t.Helper()
	if k.Cluster == nil {
		notRun(t, what+" needs the in-process kfake broker; KAFKA_BROKERS is set")
	}
	return k.Cluster
}

// Topic creates a topic of its own for t and deletes it when the test ends.
func (k *Kafka) Topic(t testing.TB, partitions int) string {
	t.Helper()
	return k.TopicWith(t, partitions, nil)
}

// TopicWith is Topic with topic configs (cleanup.policy, retention.ms).
func (k *Kafka) TopicWith(t testing.TB, partitions int, configs map[string]string) string {
	t.Helper()
	name := strings.ReplaceAll(UniqueName(t, "topic"), "_", "-")
	if err := k.createTopic(name, partitions, configs); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if k.Cluster == nil {
		t.Cleanup(func() {
			tr := &kafka.Transport{}
			defer tr.CloseIdleConnections()
			_, _ = k.client(tr).DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{name}})
		})
	}
	return name
}

// CreateTopic creates a topic with the given name.
func (k *Kafka) CreateTopic(name string, partitions int) error {
	return k.createTopic(name, partitions, nil)
}

func (k *Kafka) createTopic(name string, partitions int, configs map[string]string) error {
	if k.Cluster != nil {
		return k.Cluster.CreateTopic(name, int32(partitions), configs)
	}
	tc := kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: -1}
	for n, v := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: n, ConfigValue: v})
	}
	// A transport of the call's own, closed after it: a nil *Transport in the
	// client would panic, and the shared default one leaves pooled connections
	// that goleak reports.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := k.client(tr).CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = resp.Errors[name]
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

func (k *Kafka) client(tr *kafka.Transport) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second, Transport: tr}
}

// ReadAll reads every message of topic, partition by partition, up to the
// end offsets as of the call, without a consumer group.
func (k *Kafka) ReadAll(ctx context.Context, t testing.TB, topic string, partitions int) []kafka.Message {
	t.Helper()
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := k.client(transport).ListOffsets(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, Partition: po.Partition, MaxWait: 100 * time.Millisecond})
		for last := int64(-1); last < po.LastOffset-1; { // offsets may have gaps
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("partition %d: %v", po.Partition, err)
			}
			out, last = append(out, m), m.Offset
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
