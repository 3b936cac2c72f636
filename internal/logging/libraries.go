package logging

import (
	"context"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// The libraries' own loggers, routed through zap so that every line is JSON
// under LOG_FORMAT=json. go-redis's and the MySQL driver's are process-wide
// (redis.SetLogger, mysql.SetLogger): a program's main sets them, once.

// Redis is go-redis's logger: its lines (a pool that cannot dial) as warnings.
func Redis(log *zap.Logger) RedisLogger {
	return RedisLogger{log.WithOptions(zap.WithCaller(false)).With(zap.String("component", "redis"))}
}

// RedisLogger implements go-redis's Logging.
type RedisLogger struct{ log *zap.Logger }

// Printf writes one warning, without go-redis's "redis: " prefix.
func (l RedisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}

// MySQLDriver is the go-sql-driver/mysql logger (a connection lost mid-packet).
func MySQLDriver(log *zap.Logger) DriverLogger {
	return DriverLogger{log.WithOptions(zap.WithCaller(false)).With(zap.String("component", "mysql"))}
}

// DriverLogger implements the MySQL driver's Logger.
type DriverLogger struct{ log *zap.Logger }

// Print writes one warning.
func (l DriverLogger) Print(v ...any) { l.log.Warn(strings.TrimSpace(fmt.Sprint(v...))) }

// Kafka is the ErrorLogger of a kafka-go Reader, Writer or ConsumerGroup:
// kafka-go retries by itself and reports each failed attempt here.
func Kafka(log *zap.Logger) kafka.Logger {
	return kafka.LoggerFunc(log.WithOptions(zap.WithCaller(false)).With(zap.String("component", "kafka")).Sugar().Warnf)
}
