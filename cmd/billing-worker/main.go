// Command billing-worker consumes payment.succeeded in a consumer group and
// deducts merchant quota: Redis lock + Lua on the hot path, the MySQL ledger as
// the truth, poison events to the dead-letter topic.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/worker"
)

func main() {
	if err := parseArgs(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		os.Exit(cli.Code(err)) // help or the version (0), or a bad command line (2)
	}
	if err := run(os.Getenv); err != nil {
		logging.Failure(os.Stderr, "billing-worker", os.Getenv("LOG_FORMAT"), err)
		os.Exit(cli.Code(err))
	}
}

func run(getenv func(string) string) error {
	cfg, err := config.Load(getenv, config.NeedKafka, config.NeedWorkerID)
	if err != nil {
		return err
	}
	log, err := logging.Build(logging.Options{Level: cfg.LogLevel, Format: cfg.LogFormat, Sampling: cfg.LogSampling})
	if err != nil {
		return err
	}
	defer log.Sync()                    //nolint:errcheck // stderr sync errors are not actionable
	redis.SetLogger(logging.Redis(log)) // process-wide, so set here, once
	_ = mysql.SetLogger(logging.MySQLDriver(log))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A second signal exits at once: the first one is draining, the operator wants out.
	go func() {
		<-ctx.Done()
		stop()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		<-again
		log.Warn("second signal: exiting without draining")
		os.Exit(130)
	}()

	log.Info("starting billing-worker",
		zap.Strings("brokers", cfg.Kafka.Brokers), zap.String("topic", cfg.Kafka.Topic), zap.String("group", cfg.Kafka.Group),
		zap.Strings("redis", cfg.Redis.Addrs), zap.String("mysql", cfg.MySQL.Redacted()), zap.Int("worker_id", cfg.IDGen.WorkerID))
	// The scraped registry carries the runtime and process collectors too.
	w, err := worker.New(ctx, cfg, log, worker.Options{Registry: metrics.NewRegistry()})
	if err != nil {
		if ctx.Err() != nil {
			// A signal while starting (e.g. waiting for a held worker-ID lease) is a clean stop.
			log.Info("signal during start-up; stopped before consuming", zap.NamedError("start", err))
			return nil
		}
		return err
	}
	log.Info("serving ops endpoints", zap.Stringer("http_addr", w.HTTPAddr))
	if w.AdminAddr != nil {
		log.Info("serving the read API", zap.Stringer("admin_addr", w.AdminAddr))
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("billing-worker stopped cleanly")
	return nil
}
