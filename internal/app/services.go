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

// services are the connections a program shares between its parts.
type services struct {
	Redis redis.UniversalClient
	DB    *gorm.DB
	Kafka dial.Kafka
	Keys  keyspace.Keyspace
}

// openServices opens the connections the config names; nothing is dialled until used.
func openServices(ctx context.Context, cfg config.Config, clientID string, log *zap.Logger) (*services, error) {
	keys, err := keyspace.New(cfg.Redis.KeyPrefix)
	if err != nil {
		return nil, err
	}
	rdb, err := dial.Redis(cfg.Redis)
	if err != nil {
		return nil, err
	}
	s := &services{Redis: rdb, Keys: keys}
	if s.DB, err = dial.MySQL(ctx, cfg.MySQL, log); err == nil {
		if s.Kafka, err = dial.KafkaClients(cfg.Kafka, clientID); err == nil {
			return s, nil
		}
	}
	return nil, errors.Join(err, s.Close())
}

func (s *services) pingRedis(ctx context.Context) error {
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

func (s *services) pingMySQL(ctx context.Context) error {
	sqlDB, err := s.DB.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// Close closes every connection opened.
func (s *services) Close() error {
	if s.Kafka.Transport != nil {
		s.Kafka.Transport.CloseIdleConnections()
	}
	err := s.Redis.Close()
	if s.DB != nil {
		sqlDB, dbErr := s.DB.DB()
		if dbErr == nil {
			dbErr = sqlDB.Close()
		}
		err = errors.Join(err, dbErr)
	}
	return err
}
