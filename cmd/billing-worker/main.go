// Command billing-worker consumes payment.succeeded in a consumer group and
// deducts merchant quota: Redis lock + Lua on the hot path, the MySQL ledger as
// the truth, poison events to the dead-letter topic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/app"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/metrics"
)

func main() {
	fs := flag.NewFlagSet("billing-worker", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "override KAFKA_BROKERS")
	httpAddr := fs.String("http-addr", "", "override HTTP_ADDR")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	overrides := map[string]string{"KAFKA_BROKERS": *brokers, "HTTP_ADDR": *httpAddr}
	getenv := func(k string) string {
		if v := overrides[k]; v != "" {
			return v
		}
		return os.Getenv(k)
	}
	if err := run(getenv); err != nil {
		fmt.Fprintln(os.Stderr, "billing-worker:", err)
		os.Exit(1)
	}
}

func run(getenv func(string) string) error {
	cfg, err := config.Load(getenv, config.NeedKafka, config.NeedWorkerID)
	if err != nil {
		return err
	}
	log, err := logging.New(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr sync errors are not actionable

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
	// The runtime and process collectors (go_goroutines, process_resident_memory_bytes)
	// belong on the scraped registry: app.NewWorker's default registry has neither.
	w, err := app.NewWorker(ctx, cfg, log, app.WorkerOptions{Registry: metrics.NewRegistry()})
	if err != nil {
		if ctx.Err() != nil {
			// A signal while starting (e.g. waiting for the worker-ID lease of a
			// previous incarnation to expire) is a clean stop, not a failure.
			log.Info("signal during start-up; stopped before consuming", zap.NamedError("start", err))
			return nil
		}
		return err
	}
	log.Info("serving ops endpoints", zap.Stringer("http_addr", w.HTTPAddr))
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("billing-worker stopped cleanly")
	return nil
}
