// Package app assembles the billing worker from a Config: the mains and the
// demo use it, so the demo runs exactly the production wiring.
package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/keyspace"
)

// Services are the connections a program shares between its parts.
type Services struct {
	Redis redis.UniversalClient
	DB    *gorm.DB
	Kafka dial.Kafka
	Keys  keyspace.Keyspace
}

// OpenServices opens the connections the config names. Nothing is dialled
// until used; Ping checks them.
func OpenServices(ctx context.Context, cfg config.Config, clientID string, log *zap.Logger) (*Services, error) {
	keys, err := keyspace.New(cfg.Redis.KeyPrefix)
	if err != nil {
		return nil, err
	}
	rdb, err := dial.Redis(cfg.Redis)
	if err != nil {
		return nil, err
	}
	db, err := dial.MySQL(ctx, cfg.MySQL, log)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	kc, err := dial.KafkaClients(cfg.Kafka, clientID)
	if err != nil {
		rdb.Close()
		closeDB(db)
		return nil, err
	}
	return &Services{Redis: rdb, DB: db, Kafka: kc, Keys: keys}, nil
}

// PingRedis reports whether Redis answers.
func (s *Services) PingRedis(ctx context.Context) error {
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// PingMySQL reports whether MySQL answers.
func (s *Services) PingMySQL(ctx context.Context) error {
	sqlDB, err := s.DB.DB()
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// Ping checks both stores: the consumer's probe to tell an outage from a poison message.
func (s *Services) Ping(ctx context.Context) error {
	return errors.Join(s.PingRedis(ctx), s.PingMySQL(ctx))
}

// Close closes every connection.
func (s *Services) Close() error {
	if s.Kafka.Transport != nil {
		s.Kafka.Transport.CloseIdleConnections()
	}
	return errors.Join(s.Redis.Close(), closeDB(s.DB))
}

func closeDB(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}
