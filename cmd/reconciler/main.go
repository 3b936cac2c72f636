// Command reconciler compares every merchant's Redis quota with MySQL, reports
// drift and repairs Redis: once (a CronJob) or in a loop (--every 5m).
//
// Exit code of a single run: 0 clean, 1 drift found (dry run, over the repair
// ceiling, critical or aborted), 2 every finding repaired, 3 failed (also for a
// bad command line or environment). The loop exits 0 on SIGTERM.
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
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/httpserver"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/reconcile"
)

const exitFailed = 3

func main() {
	os.Exit(run())
}

func run() int {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return exitFailed
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	log, err := logging.New(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code, err := serve(ctx, cfg, opts, log)
	if err != nil {
		log.Error("reconciler", zap.Error(err))
		return exitFailed
	}
	return code
}

// serve wires the reconciler and runs it once (returning the run's exit code)
// or in a loop with the ops HTTP server until ctx ends (returning 0).
func serve(ctx context.Context, cfg config.Config, opts options, log *zap.Logger) (int, error) {
	keys, err := keyspace.New(cfg.Redis.KeyPrefix)
	if err != nil {
		return 0, err
	}
	rdb, err := dial.Redis(cfg.Redis)
	if err != nil {
		return 0, err
	}
	defer rdb.Close()
	gdb, err := dial.MySQL(ctx, cfg.MySQL, log)
	if err != nil {
		return 0, err
	}
	db, err := gdb.DB()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	reg := metrics.NewRegistry()
	lockMetrics, err := lock.NewMetrics(reg)
	if err != nil {
		return 0, err
	}
	locks, err := lock.New(rdb, lock.Options{Metrics: lockMetrics, Logger: log})
	if err != nil {
		return 0, err
	}
	defer locks.Close()
	if opts.Config.Metrics, err = reconcile.NewMetrics(reg); err != nil {
		return 0, err
	}
	opts.Config.Logger = log
	r, err := reconcile.New(db, rdb, keys, reconcile.NewLocker(locks), opts.Config)
	if err != nil {
		return 0, err
	}
	report := func(rep *reconcile.Report) {
		if err := writeReport(os.Stdout, rep, opts.Output); err != nil {
			log.Warn("write report", zap.Error(err))
		}
	}
	if opts.Every == 0 {
		rep := r.Run(ctx)
		report(rep)
		return rep.Exit(), nil
	}
	srv := httpserver.New(cfg.HTTPAddr, reg, log)
	srv.AddReadiness("redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	srv.AddReadiness("mysql", db.PingContext)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return r.Loop(gctx, opts.Every, report) })
	return 0, g.Wait()
}
