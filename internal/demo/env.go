package demo

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/quotaflow/billing/internal/migrate"
)

// stage is what the demo sets up and tears down: a broker (embedded unless
// brokers were given), a fresh database and a Redis key prefix of its own.
type stage struct {
	brokers  []string
	cluster  *kfake.Cluster // nil with an external broker
	topic    string
	dlqTopic string
	group    string
	dbName   string
	dsn      string
	admin    *sql.DB
	prefix   string
	redis    redis.UniversalClient
	// transport carries the demo's own Kafka requests; closing it at teardown
	// leaves no pooled connection behind.
	transport *kafka.Transport
}

func newStage(ctx context.Context, o Options) (_ *stage, err error) {
	id := time.Now().UTC().Format("20060102_150405")
	s := &stage{dbName: "billing_demo_" + id, prefix: "demo:" + id + ":", group: "billing-demo-" + id, transport: &kafka.Transport{}}
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	if err := s.startBroker(ctx, o, id); err != nil {
		return nil, err
	}
	if err := s.createDatabase(ctx, o.MySQLDSN); err != nil {
		return nil, err
	}
	s.redis = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: o.RedisAddrs})
	if err := s.redis.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("demo: redis %v: %w", o.RedisAddrs, err)
	}
	return s, nil
}

// dlqCleanup is the dead-letter topic's cleanup.policy, as in production:
// compaction folds the copies of a message dead-lettered more than once.
const dlqCleanup = "compact,delete"

func (s *stage) startBroker(ctx context.Context, o Options, id string) error {
	s.brokers = o.Brokers
	s.topic, s.dlqTopic = "payment.succeeded", "payment.succeeded.dlq"
	if len(s.brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.Partitions), s.topic))
		if err != nil {
			return fmt.Errorf("demo: embedded broker: %w", err)
		}
		if err := c.CreateTopic(s.dlqTopic, 1, map[string]string{"cleanup.policy": dlqCleanup}); err != nil {
			c.Close()
			return fmt.Errorf("demo: embedded broker: %w", err)
		}
		s.cluster, s.brokers = c, c.ListenAddrs()
		return nil
	}
	// A real cluster: topics of this run only, so nothing of an earlier run is consumed.
	s.topic, s.dlqTopic = "demo-"+id+".payment.succeeded", "demo-"+id+".payment.succeeded.dlq"
	resp, err := s.client().CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: s.topic, NumPartitions: o.Partitions, ReplicationFactor: -1},
		{Topic: s.dlqTopic, NumPartitions: 1, ReplicationFactor: -1, ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: dlqCleanup}}},
	}})
	if err != nil {
		return fmt.Errorf("demo: create topics on %v: %w", s.brokers, err)
	}
	for t, err := range resp.Errors {
		if err != nil {
			return fmt.Errorf("demo: create topic %s: %w", t, err)
		}
	}
	return nil
}

func (s *stage) createDatabase(ctx context.Context, serverDSN string) error {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return fmt.Errorf("demo: MYSQL_DSN is malformed")
	}
	cfg.DBName, cfg.ParseTime = "", true
	if s.admin, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return err
	}
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE `"+s.dbName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return fmt.Errorf("demo: create database on %s@%s: %w", cfg.User, cfg.Addr, err)
	}
	cfg.DBName = s.dbName
	s.dsn = cfg.FormatDSN()
	m, err := migrate.Open(s.dsn)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up()
	return err
}

// teardown removes everything the demo made.
func (s *stage) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.redis != nil {
		iter := s.redis.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for i := 0; i < len(keys); i += 500 {
			s.redis.Del(ctx, keys[i:min(i+500, len(keys))]...)
		}
		s.redis.Close()
	}
	if s.admin != nil {
		s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.dbName+"`") //nolint:errcheck // best effort at exit
		s.admin.Close()
	}
	s.transport.CloseIdleConnections()
	if s.cluster != nil {
		s.cluster.Close()
	}
}

func (s *stage) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(s.brokers...), Timeout: 15 * time.Second, Transport: s.transport}
}

func (s *stage) env(workerID int, o Options) map[string]string {
	return map[string]string{
		"KAFKA_BROKERS": strings.Join(s.brokers, ","), "KAFKA_TOPIC": s.topic, "KAFKA_DLQ_TOPIC": s.dlqTopic, "KAFKA_GROUP": s.group,
		"REDIS_ADDR": strings.Join(o.RedisAddrs, ","), "REDIS_KEY_PREFIX": s.prefix, "MYSQL_DSN": s.dsn,
		"IDGEN_WORKER_ID": fmt.Sprint(workerID), "HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": o.LogLevel,
		"WORKER_COMMIT_INTERVAL": "200ms", "SHUTDOWN_TIMEOUT": "10s",
	}
}
