// Package writepath assembles what billing-worker and billingctl share: the
// connections a Config names, and the write path on a leased Snowflake worker
// ID (merchant locks, the ledger store, the Deductor, the shard cache).
package writepath

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/keyspace"
)

// Services are the connections a program shares between its parts.
type Services struct {
	Redis redis.UniversalClient
	DB    *gorm.DB
	SQL   *sql.DB // DB's pool
	Kafka dial.Kafka
	Keys  keyspace.Keyspace
	// Clock is the Snowflake generator's and its lease's; nil: the system
	// clock (tests set it back).
	Clock idgen.Clock
}

// OpenServices opens the connections the config names; nothing is dialled until used.
func OpenServices(ctx context.Context, cfg config.Config, clientID string, log *zap.Logger) (*Services, error) {
	keys, err := keyspace.New(cfg.Redis.KeyPrefix)
	if err != nil {
		return nil, err
	}
	rdb, err := dial.Redis(cfg.Redis)
	if err != nil {
		return nil, err
	}
	s := &Services{Redis: rdb, Keys: keys}
	if s.DB, err = dial.MySQL(ctx, cfg.MySQL, log); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	if s.SQL, err = s.DB.DB(); err != nil {
		return nil, errors.Join(fmt.Errorf("writepath: mysql pool: %w", err), s.Close())
	}
	if s.Kafka, err = dial.KafkaClients(cfg.Kafka, clientID); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// PingRedis is Redis's health.
func (s *Services) PingRedis(ctx context.Context) error {
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// PingMySQL is MySQL's health.
func (s *Services) PingMySQL(ctx context.Context) error {
	if err := s.SQL.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// Close closes every connection opened.
func (s *Services) Close() error {
	if s.Kafka.Transport != nil {
		s.Kafka.Transport.CloseIdleConnections()
	}
	err := s.Redis.Close()
	if s.SQL != nil {
		err = errors.Join(err, s.SQL.Close())
	}
	return err
}
