package load

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/quotaflow/billing/internal/migrate"
)

// stage is what a run sets up and removes: a broker (embedded unless brokers
// were given) with topics of the run, a fresh migrated database, a Redis key
// prefix.
type stage struct {
	id        string
	brokers   []string
	cluster   *kfake.Cluster // nil with an external broker
	ownTopics bool           // created on an external broker: deleted at teardown
	topic     string
	dlqTopic  string
	group     string
	adminDSN  string // the server, no database
	dsn       string // the run's database
	dbName    string
	admin     *sql.DB
	db        *sql.DB // the run's database: fill, polls, checks
	prefix    string
	redis     redis.UniversalClient
	transport *kafka.Transport // the run's own Kafka requests, closed at teardown
}

func newStage(ctx context.Context, o Options) (_ *stage, err error) {
	var b [2]byte
	_, _ = rand.Read(b[:]) // never fails
	id := time.Now().UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
	s := &stage{id: id, group: "billing-load-" + id, prefix: o.KeyPrefix + id + ":", redis: o.Redis, transport: &kafka.Transport{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.teardown())
		}
	}()
	if err := s.startBroker(ctx, o); err != nil {
		return nil, err
	}
	if err := s.createDatabase(ctx, o.MySQLDSN); err != nil {
		return nil, err
	}
	if err := s.redis.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("load: redis %v: %w", o.RedisAddrs, err)
	}
	return s, nil
}

func (s *stage) startBroker(ctx context.Context, o Options) error {
	s.brokers = o.Brokers
	s.topic, s.dlqTopic = "payment.succeeded", "payment.succeeded.dlq"
	if len(s.brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.Partitions), s.topic), kfake.SeedTopics(1, s.dlqTopic))
		if err != nil {
			return fmt.Errorf("load: embedded broker: %w", err)
		}
		s.cluster, s.brokers = c, c.ListenAddrs()
		return nil
	}
	// A real cluster: topics of this run only, deleted at teardown.
	s.topic, s.dlqTopic = "load-"+s.id+".payment.succeeded", "load-"+s.id+".payment.succeeded.dlq"
	resp, err := s.client().CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: s.topic, NumPartitions: o.Partitions, ReplicationFactor: -1},
		{Topic: s.dlqTopic, NumPartitions: 1, ReplicationFactor: -1},
	}})
	if err != nil {
		return fmt.Errorf("load: create topics on %v: %w", s.brokers, err)
	}
	s.ownTopics = true // even half-created: teardown deletes what exists
	for t, err := range resp.Errors {
		if err != nil {
			return fmt.Errorf("load: create topic %s: %w", t, err)
		}
	}
	return nil
}

func (s *stage) createDatabase(ctx context.Context, serverDSN string) error {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return fmt.Errorf("load: MySQL DSN: %w", err)
	}
	cfg.DBName, cfg.ParseTime = "", true
	s.adminDSN = cfg.FormatDSN()
	if s.admin, err = sql.Open("mysql", s.adminDSN); err != nil {
		return fmt.Errorf("load: open MySQL: %w", err)
	}
	s.dbName = "billing_load_" + s.id
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE `"+s.dbName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		s.dbName = ""
		return fmt.Errorf("load: create database on %s: %w", cfg.Addr, err)
	}
	cfg.DBName = s.dbName
	s.dsn = cfg.FormatDSN()
	m, err := migrate.Open(s.dsn)
	if err != nil {
		return err
	}
	_, err = m.Up()
	if err := errors.Join(err, m.Close()); err != nil {
		return err
	}
	cfg.InterpolateParams = true // polls and checks: one round trip each
	if s.db, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return fmt.Errorf("load: open %s: %w", s.dbName, err)
	}
	s.db.SetMaxOpenConns(4)
	return nil
}

// teardown removes everything the run made, within a minute of its own (an
// interrupted run still cleans up).
func (s *stage) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if s.redis != nil {
		errs = append(errs, deletePrefix(ctx, s.redis, s.prefix))
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.admin != nil {
		if s.dbName != "" {
			if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.dbName+"`"); err != nil {
				errs = append(errs, fmt.Errorf("load: drop database %s: %w", s.dbName, err))
			}
		}
		s.admin.Close()
	}
	if s.cluster != nil {
		s.cluster.Close()
	} else if s.ownTopics {
		if _, err := s.client().DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{s.topic, s.dlqTopic}}); err != nil {
			errs = append(errs, fmt.Errorf("load: delete topics %s, %s: %w", s.topic, s.dlqTopic, err))
		}
	}
	s.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

func (s *stage) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(s.brokers...), Timeout: 15 * time.Second, Transport: s.transport}
}

// deletePrefix unlinks every key under prefix, on every master of a cluster.
func deletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return deletePrefixOn(ctx, n, prefix) })
	}
	return deletePrefixOn(ctx, rdb, prefix)
}

func deletePrefixOn(ctx context.Context, c redis.Cmdable, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("load: scan %s*: %w", prefix, err)
	}
	for i := 0; i < len(keys); i += 1000 {
		if err := c.Unlink(ctx, keys[i:min(i+1000, len(keys))]...).Err(); err != nil {
			return fmt.Errorf("load: delete %s*: %w", prefix, err)
		}
	}
	return nil
}
