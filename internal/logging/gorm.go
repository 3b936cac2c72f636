package logging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// GORM is a GORM logger writing one zap line per failed or slow statement,
// with the statement (placeholders, never values), the rows, the elapsed time
// and the error as fields, and no source path. A missing record is no error.
func GORM(log *zap.Logger, slow time.Duration) gormlogger.Interface {
	return gormLog{log: log.WithOptions(zap.WithCaller(false)).With(zap.String("component", "gorm")), slow: slow}
}

type gormLog struct {
	log  *zap.Logger
	slow time.Duration
}

// LogMode is ignored: the zap level decides.
func (g gormLog) LogMode(gormlogger.LogLevel) gormlogger.Interface { return g }

func (g gormLog) Info(_ context.Context, msg string, args ...any) {
	g.log.Info(fmt.Sprintf(msg, args...))
}

func (g gormLog) Warn(_ context.Context, msg string, args ...any) {
	g.log.Warn(fmt.Sprintf(msg, args...))
}

func (g gormLog) Error(_ context.Context, msg string, args ...any) {
	g.log.Error(fmt.Sprintf(msg, args...))
}

func (g gormLog) Trace(_ context.Context, begin time.Time, fc func() (string, int64), err error) {
	elapsed := time.Since(begin)
	failed := err != nil && !errors.Is(err, gorm.ErrRecordNotFound)
	if !failed && (g.slow <= 0 || elapsed < g.slow) {
		return
	}
	sql, rows := fc()
	fields := []zap.Field{zap.String("sql", sql), zap.Int64("rows", rows), zap.Duration("elapsed", elapsed)}
	if failed {
		g.log.Warn("sql statement failed", append(fields, zap.Error(err))...)
		return
	}
	g.log.Warn("slow sql statement", append(fields, zap.Duration("slow_threshold", g.slow))...)
}

// ParamsFilter drops the values: statements are logged with placeholders only.
func (gormLog) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
