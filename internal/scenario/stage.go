package scenario

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/quotaflow/billing/internal/migrate"
)

// StageOptions say where a run is staged.
type StageOptions struct {
	Name       string                // "demo", "load": starts the database's, group's and topics' names
	MySQLDSN   string                // any DSN of the server: the run creates its own database
	Redis      redis.UniversalClient // the run's keys are deleted through it (the caller closes it)
	KeyPrefix  string                // start of the run's Redis prefix
	Brokers    []string              // empty: a broker embedded in this process
	Partitions int                   // of the payment topic
}

// Stage is what a run sets up and removes: a broker (embedded unless brokers
// were given) with topics of the run, a fresh migrated database and a Redis
// key prefix of the run's own.
type Stage struct {
	ID              string
	Brokers         []string
	Cluster         *kfake.Cluster // nil with an external broker
	Topic, DLQTopic string
	EventsTopic     string // balance events (QUOTA_EVENTS_TOPIC)
	RefundsTopic    string // refunds (KAFKA_REFUNDS_TOPIC)
	Group           string
	AdminDSN        string // the server, no database
	DSN             string // the run's database
	DBName          string
	Prefix          string
	Redis           redis.UniversalClient
	Transport       *kafka.Transport // the run's own Kafka requests, closed at teardown
	admin           *sql.DB
	ownTopics       bool // created on an external broker: deleted at teardown
}

// dlqCleanup is the dead-letter topic's cleanup.policy, as in production:
// compaction folds the copies of a message dead-lettered more than once.
const dlqCleanup = "compact,delete"

// NewStage sets up a run; what it made is removed again when it fails.
func NewStage(ctx context.Context, o StageOptions) (_ *Stage, err error) {
	id := RunID()
	s := &Stage{ID: id, Group: "billing-" + o.Name + "-" + id, Prefix: o.KeyPrefix + id + ":", Redis: o.Redis, Transport: &kafka.Transport{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Teardown())
		}
	}()
	if err := s.startBroker(ctx, o); err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(o.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("scenario: MySQL DSN: %w", err)
	}
	cfg.DBName, cfg.ParseTime = "", true
	s.AdminDSN = cfg.FormatDSN()
	if s.admin, err = sql.Open("mysql", s.AdminDSN); err != nil {
		return nil, fmt.Errorf("scenario: open MySQL: %w", err)
	}
	s.DBName = "billing_" + o.Name + "_" + id // dropped at teardown even if half made
	if s.DSN, err = migrate.CreateDatabase(ctx, s.admin, s.AdminDSN, s.DBName, true); err != nil {
		return nil, err
	}
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("scenario: redis: %w", err)
	}
	return s, nil
}

func (s *Stage) startBroker(ctx context.Context, o StageOptions) error {
	s.Brokers = o.Brokers
	s.Topic, s.DLQTopic, s.EventsTopic, s.RefundsTopic = "payment.succeeded", "payment.succeeded.dlq", "quota.events", "payment.refunded"
	if len(s.Brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.Partitions), s.Topic, s.EventsTopic, s.RefundsTopic))
		if err != nil {
			return fmt.Errorf("scenario: embedded broker: %w", err)
		}
		s.Cluster, s.Brokers = c, c.ListenAddrs()
		if err := c.CreateTopic(s.DLQTopic, 1, map[string]string{"cleanup.policy": dlqCleanup}); err != nil {
			return fmt.Errorf("scenario: embedded broker: %w", err)
		}
		return nil
	}
	// A real cluster: topics of this run only, so nothing of an earlier run is consumed.
	s.Topic, s.DLQTopic = o.Name+"-"+s.ID+".payment.succeeded", o.Name+"-"+s.ID+".payment.succeeded.dlq"
	s.EventsTopic, s.RefundsTopic = o.Name+"-"+s.ID+".quota.events", o.Name+"-"+s.ID+".payment.refunded"
	resp, err := s.Client().CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: s.Topic, NumPartitions: o.Partitions, ReplicationFactor: -1},
		{Topic: s.RefundsTopic, NumPartitions: o.Partitions, ReplicationFactor: -1},
		{Topic: s.EventsTopic, NumPartitions: o.Partitions, ReplicationFactor: -1},
		{Topic: s.DLQTopic, NumPartitions: 1, ReplicationFactor: -1, ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: dlqCleanup}}},
	}})
	if err != nil {
		return fmt.Errorf("scenario: create topics on %v: %w", s.Brokers, err)
	}
	s.ownTopics = true // even half-created: teardown deletes what exists
	for t, err := range resp.Errors {
		if err != nil {
			return fmt.Errorf("scenario: create topic %s: %w", t, err)
		}
	}
	return nil
}

// Teardown removes everything the run made, within a minute of its own (an
// interrupted run still cleans up).
func (s *Stage) Teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if s.Redis != nil {
		errs = append(errs, DeletePrefix(ctx, s.Redis, s.Prefix))
	}
	if s.admin != nil {
		if s.DBName != "" {
			errs = append(errs, DropDatabase(ctx, s.admin, s.DBName))
		}
		s.admin.Close()
	}
	if s.Cluster != nil {
		s.Cluster.Close()
	} else if s.ownTopics {
		topics := []string{s.Topic, s.DLQTopic, s.EventsTopic, s.RefundsTopic}
		if _, err := s.Client().DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics}); err != nil {
			errs = append(errs, fmt.Errorf("scenario: delete topics %v: %w", topics, err))
		}
	}
	s.Transport.CloseIdleConnections()
	return errors.Join(errs...)
}

// WorkerEnv is the environment of billing-worker workerID on the stage.
func (s *Stage) WorkerEnv(workerID int, redisAddrs []string, httpAddr, logLevel string) map[string]string {
	return map[string]string{
		"KAFKA_BROKERS": strings.Join(s.Brokers, ","), "KAFKA_TOPIC": s.Topic, "KAFKA_DLQ_TOPIC": s.DLQTopic, "KAFKA_GROUP": s.Group,
		"QUOTA_EVENTS_TOPIC": s.EventsTopic, "KAFKA_REFUNDS_TOPIC": s.RefundsTopic,
		"REDIS_ADDR": strings.Join(redisAddrs, ","), "REDIS_KEY_PREFIX": s.Prefix, "MYSQL_DSN": s.DSN,
		"IDGEN_WORKER_ID": strconv.Itoa(workerID), "HTTP_ADDR": httpAddr, "LOG_LEVEL": logLevel,
	}
}

// RunID names a run: its start time and a random suffix.
func RunID() string {
	var b [2]byte
	_, _ = rand.Read(b[:]) // never fails
	return time.Now().UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
}

// RedisVersion is the server's redis_version, or "unknown".
func RedisVersion(ctx context.Context, rdb redis.UniversalClient) string {
	info, _ := rdb.Info(ctx, "server").Result()
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// Client is a Kafka client of the stage's brokers.
func (s *Stage) Client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(s.Brokers...), Timeout: 15 * time.Second, Transport: s.Transport}
}

// DropDatabase drops name; ctx should outlive an interrupted run.
func DropDatabase(ctx context.Context, admin *sql.DB, name string) error {
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("scenario: drop database %s: %w", name, err)
	}
	return nil
}

// DeletePrefix unlinks every key under prefix, on every master of a cluster.
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return deletePrefixOn(ctx, n, prefix) })
	}
	return deletePrefixOn(ctx, rdb, prefix)
}

func deletePrefixOn(ctx context.Context, c redis.Cmdable, prefix string) error {
	for cursor := uint64(0); ; {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err == nil && len(keys) > 0 {
			err = c.Unlink(ctx, keys...).Err()
		}
		if err != nil {
			return fmt.Errorf("scenario: delete %s*: %w", prefix, err)
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
