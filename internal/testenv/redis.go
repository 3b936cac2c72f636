package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/quotaflow/billing/internal/keyspace"
)

// Redis is a test's view of a real Redis: a client and a key prefix of its own.
type Redis struct {
	Addr   string
	Client redis.UniversalClient
	Keys   keyspace.Keyspace
}

var (
	redisOnce sync.Once
	redisAddr string
	redisErr  error
)

// NewRedis returns a client to a real Redis with a key prefix unique to t.
// Every key under the prefix is deleted when the test ends.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	redisOnce.Do(func() { redisAddr, redisErr = findRedis() })
	if redisErr != nil {
		unavailable(t, "Redis", redisErr)
	}
	keys, err := keyspace.New(UniqueName(t, "t") + ":")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pipe := client.Pipeline()
		for iter := client.Scan(ctx, 0, keys.Prefix()+"*", 1000).Iterator(); iter.Next(ctx); {
			pipe.Unlink(ctx, iter.Val())
		}
		_, _ = pipe.Exec(ctx)
		client.Close()
	})
	return &Redis{Addr: redisAddr, Client: client, Keys: keys}
}

func findRedis() (string, error) {
	addr := envOr("BILLING_TEST_REDIS_ADDR", "127.0.0.1:6379")
	err := pingRedis(addr)
	if err == nil {
		return addr, nil
	}
	// A container of testcontainers-go: Ryuk removes it when the test binary exits.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, cerr := tcredis.Run(ctx, "redis:7")
	if cerr != nil {
		return "", errors.Join(err, cerr)
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

func pingRedis(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}
