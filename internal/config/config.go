// Package config turns the environment into a validated Config.
//
// Every problem is reported at once, each naming the variable and the value,
// so an operator fixes a broken Deployment in one round instead of five.
// Secrets are never echoed: a DSN is shown with its password masked.
package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Need names a dependency the calling program cannot run without.
type Need int

// Dependencies a program may need.
const (
	NeedKafka    Need = iota // KAFKA_BROKERS must be set
	NeedWorkerID             // a Snowflake worker ID must resolve
)

// Config is the whole environment contract (docs/configuration.md).
type Config struct {
	Kafka    Kafka
	Redis    Redis
	MySQL    MySQL
	HTTPAddr string
	// PprofAddr serves net/http/pprof when set: its own listener, off by
	// default, so profiles are never on the port Prometheus scrapes.
	PprofAddr string
	LogLevel  string
	// LogFormat is json, console, or auto (console on a terminal, else json).
	LogFormat string
	// LogSampling thins repeated debug and info lines; warnings and errors
	// (dead letters, stale caches, repairs) are never dropped.
	LogSampling bool
	LockTTL     time.Duration
	IDGen       IDGen
	Worker      Worker
	Tracing     Tracing
	Admin       Admin
	QuotaEvents QuotaEvents
}

// Default values of the environment contract.
const (
	DefaultTopic    = "payment.succeeded"
	DefaultGroup    = "billing-worker"
	DefaultDLQTopic = "payment.succeeded.dlq"
	// DefaultGrantsTopic is the topic of grant commands.
	DefaultGrantsTopic = "quota.grants"
	// DefaultRefundsTopic is the topic of refunds.
	DefaultRefundsTopic = "payment.refunded"
	DefaultRedis        = "127.0.0.1:6379"
	DefaultMySQLDSN     = "root@tcp(127.0.0.1:3306)/billing?parseTime=true"
	DefaultHTTPAddr     = ":9100"
	DefaultLockTTL      = 30 * time.Second
	DefaultLogLevel     = "info"
	DefaultLogFormat    = "auto"
)

// Load reads the environment through getenv (os.Getenv in main, a map in tests).
func Load(getenv func(string) string, needs ...Need) (Config, error) {
	p := &parser{getenv: getenv}
	cfg := p.config(needs)
	if len(p.errs) > 0 {
		return Config{}, &Error{Problems: p.errs}
	}
	return cfg, nil
}

func (p *parser) config(needs []Need) Config {
	cfg := Config{
		Kafka:       p.kafka(),
		Redis:       p.redis(),
		MySQL:       p.mysql(),
		HTTPAddr:    p.addr("HTTP_ADDR", DefaultHTTPAddr),
		PprofAddr:   p.optionalAddr("PPROF_ADDR"),
		LogLevel:    p.oneOf("LOG_LEVEL", DefaultLogLevel, "debug", "info", "warn", "error"),
		LogFormat:   p.oneOf("LOG_FORMAT", DefaultLogFormat, "auto", "json", "console"),
		LogSampling: p.boolean("LOG_SAMPLING", true),
		LockTTL:     p.duration("LOCK_TTL", DefaultLockTTL, 100*time.Millisecond, 10*time.Minute),
		Worker:      p.worker(),
		Tracing:     p.tracing(),
		Admin:       p.admin(),
		QuotaEvents: p.quotaEvents(),
	}
	cfg.IDGen = p.idgen(slices.Contains(needs, NeedWorkerID))
	if slices.Contains(needs, NeedKafka) && len(cfg.Kafka.Brokers) == 0 {
		p.fail("KAFKA_BROKERS", "", "is required (comma-separated host:port list)")
	}
	return cfg
}

// Variables lists every environment variable Load reads, with its default
// ("" when there is none), for docs/configuration.md and the deployment checks.
func Variables() []Variable {
	return variables
}

// Variable documents one environment variable.
type Variable struct {
	Name, Default, Doc string
	Secret             bool
}

// Error lists every problem found in the environment.
type Error struct {
	Problems []error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config: %d problem(s):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p.Error())
	}
	return b.String()
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (e *Error) Unwrap() []error { return e.Problems }
