package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	addr, cerr := redisContainer()
	if cerr != nil {
		return "", errors.Join(err, cerr)
	}
	return addr, nil
}

func pingRedis(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}
