package dial

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/config"
)

// Redis returns a client for a standalone Redis or, with several addresses or
// REDIS_CLUSTER, a Redis Cluster. It does not connect until first used.
func Redis(c config.Redis) (redis.UniversalClient, error) {
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:         c.Addrs,
		IsClusterMode: c.Cluster,
		Username:      c.Username,
		Password:      c.Password,
		DB:            c.DB,
		TLSConfig:     tc,
		DialTimeout:   2 * time.Second,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
		PoolTimeout:   3 * time.Second,
		// Without it go-redis bounds a read by ReadTimeout alone, ignoring the
		// context's deadline: a lock renewal to a silent Redis would outlive
		// the lock (internal/lock bounds each by the lock's expiry).
		ContextTimeoutEnabled: true,
	}), nil
}
