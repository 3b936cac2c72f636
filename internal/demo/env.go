package demo

import (
	"fmt"
	"strings"

	"github.com/quotaflow/billing/internal/scenario"
)

func workerEnv(s *scenario.Stage, workerID int, o Options) map[string]string {
	return map[string]string{
		"KAFKA_BROKERS": strings.Join(s.Brokers, ","), "KAFKA_TOPIC": s.Topic, "KAFKA_DLQ_TOPIC": s.DLQTopic, "KAFKA_GROUP": s.Group,
		"REDIS_ADDR": strings.Join(o.RedisAddrs, ","), "REDIS_KEY_PREFIX": s.Prefix, "MYSQL_DSN": s.DSN,
		"IDGEN_WORKER_ID": fmt.Sprint(workerID), "HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": o.LogLevel,
		"WORKER_COMMIT_INTERVAL": "200ms", "SHUTDOWN_TIMEOUT": "10s",
	}
}
