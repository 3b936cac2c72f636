//go:build testcontainers

package testenv

import (
	"context"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// The fallback when no local server answers: a container of
// testcontainers-go, which Ryuk removes when the test binary exits. Built
// with -tags testcontainers (it needs a Docker engine).

// mysqlContainer starts MySQL 8 and returns its server DSN, no database.
func mysqlContainer() (*mysql.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcmysql.Run(ctx, "mysql:8.0", tcmysql.WithPassword("test"), tcmysql.WithUsername("root"))
	if err != nil {
		return nil, err
	}
	dsn, err := c.ConnectionString(ctx, "parseTime=true")
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	return cfg, nil
}

// redisContainer starts Redis 7 and returns its address.
func redisContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcredis.Run(ctx, "redis:7")
	if err != nil {
		return "", err
	}
	uri, err := c.ConnectionString(ctx)
	if err != nil {
		return "", err
	}
	opts, err := redis.ParseURL(uri)
	if err != nil {
		return "", err
	}
	return opts.Addr, nil
}
