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
	// Cluster is the in-process broker, for fault injection; nil when KAFKA_BROKERS is set.
	Cluster *kfake.Cluster
}

// NewKafka returns a broker for t. An in-process one is closed when the test ends.
func NewKafka(t testing.TB, opts ...kfake.Opt) *Kafka {
	t.Helper()
	if env := os.Getenv("KAFKA_BROKERS"); env != "" {
		brokers := strings.Split(env, ",")
		if err := pingKafka(brokers[0]); err != nil {
			unavailable(t, "Kafka (KAFKA_BROKERS)", err)
		}
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

// Topic creates a topic of its own for t and deletes it when the test ends.
func (k *Kafka) Topic(t testing.TB, partitions int) string {
	t.Helper()
	name := strings.ReplaceAll(UniqueName(t, "topic"), "_", "-")
	if err := k.CreateTopic(name, partitions); err != nil {
		t.Fatalf("testenv: create topic %s: %v", name, err)
	}
	if k.Cluster == nil {
		t.Cleanup(func() {
			client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
			_, _ = client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{name}})
		})
	}
	return name
}

// CreateTopic creates a topic with the given name.
func (k *Kafka) CreateTopic(name string, partitions int) error {
	if k.Cluster != nil {
		return k.Cluster.CreateTopic(name, int32(partitions), nil)
	}
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: -1}},
	})
	if err != nil {
		return err
	}
	if err := resp.Errors[name]; err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

func pingKafka(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}
