// Command reconciler compares every merchant's Redis quota with MySQL, reports
// drift and repairs Redis: once (a CronJob) or in a loop (--every 5m).
//
// Exit code of a single run: 0 clean or every drift repaired, 1 drift left
// (dry run, over the repair ceiling, critical or aborted), 2 bad command line
// or environment, 3 the run failed, 4 drift repaired with --fail-on-repair.
// A missing quota hash is reported and hydrated, never drift. The loop exits
// 0 on SIGTERM.
//
// `reconciler export` writes the statements of a period (see exportUsage):
// the reconciler's job is to tie billing's books out, and it already runs as
// a CronJob with the database and Redis it needs; billingctl is for an
// operator's hand.
package main

import (
	"context"
	"database/sql"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/httpserver"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/reconcile"
)

// Exit codes beyond the shared ones (cli.ExitOK, cli.ExitUsage).
const (
	exitDrift    = 1
	exitFailed   = 3
	exitRepaired = 4 // only with --fail-on-repair
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is the whole program but for the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "export" {
		return runExport(ctx, args[1:], stdout, stderr, getenv)
	}
	opts, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return cli.Code(err)
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		logging.Failure(stderr, "reconciler", getenv("LOG_FORMAT"), err)
		return cli.ExitUsage
	}
	// Never sampled: every line of the reconciler is about money (a repair, a finding).
	log, err := logging.Build(logging.Options{Level: cfg.LogLevel, Format: cfg.LogFormat})
	if err != nil {
		logging.Failure(stderr, "reconciler", cfg.LogFormat, err)
		return cli.ExitUsage
	}
	defer func() { _ = log.Sync() }()
	redis.SetLogger(logging.Redis(log)) // process-wide, so set here, once
	_ = mysql.SetLogger(logging.MySQLDriver(log))
	rep, err := serve(ctx, cfg, opts, log, stdout)
	if err != nil {
		logging.Failure(stderr, "reconciler", cfg.LogFormat, err)
		return exitFailed
	}
	return exitCode(rep, opts.FailOnRepair)
}

// exitCode is a single run's exit code (0 after a loop, which has no report).
func exitCode(rep *reconcile.Report, failOnRepair bool) int {
	switch {
	case rep == nil:
		return cli.ExitOK
	case rep.Status == reconcile.StatusFailed:
		return exitFailed
	case rep.Status == reconcile.StatusDrift:
		return exitDrift
	case rep.Status == reconcile.StatusRepaired && failOnRepair:
		return exitRepaired
	}
	return cli.ExitOK
}

// serve wires the reconciler and runs it once (returning the run's report)
// or in a loop with the ops HTTP server until ctx ends (returning nil).
func serve(ctx context.Context, cfg config.Config, opts options, log *zap.Logger, stdout io.Writer) (*reconcile.Report, error) {
	reg := metrics.NewRegistry()
	lockMetrics, err := lock.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	c, err := dialClients(ctx, cfg, lock.Options{Metrics: lockMetrics, Logger: log}, log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	keys, rdb, db, locks := c.keys, c.rdb, c.db, c.locks
	if opts.Config.Metrics, err = reconcile.NewMetrics(reg); err != nil {
		return nil, err
	}
	opts.Config.Logger = log
	r, err := reconcile.New(db, rdb, keys, reconcile.NewLocker(locks), opts.Config)
	if err != nil {
		return nil, err
	}
	report := func(rep *reconcile.Report) {
		if err := writeReport(stdout, rep, opts.Output); err != nil {
			log.Warn("write report", zap.Error(err))
		}
	}
	if opts.Every == 0 {
		rep := r.Run(ctx)
		report(rep)
		return rep, nil
	}
	srv := httpserver.New(cfg.HTTPAddr, reg, log)
	srv.AddReadiness("redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	srv.AddReadiness("mysql", db.PingContext)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return r.Loop(gctx, opts.Every, report) })
	return nil, g.Wait()
}

// clients are what both commands of the reconciler talk to.
type clients struct {
	keys  keyspace.Keyspace
	rdb   redis.UniversalClient
	db    *sql.DB
	locks *lock.Client
}

// dialClients connects to Redis and MySQL and makes the lock client; on an
// error it closes what it opened.
func dialClients(ctx context.Context, cfg config.Config, lockOpts lock.Options, log *zap.Logger) (_ *clients, err error) {
	c := &clients{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.keys, err = keyspace.New(cfg.Redis.KeyPrefix); err != nil {
		return nil, err
	}
	if c.rdb, err = dial.Redis(cfg.Redis); err != nil {
		return nil, err
	}
	gdb, err := dial.MySQL(ctx, cfg.MySQL, log)
	if err != nil {
		return nil, err
	}
	if c.db, err = gdb.DB(); err != nil {
		return nil, err
	}
	if c.locks, err = lock.New(c.rdb, lockOpts); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes the clients in the reverse order of dialClients.
func (c *clients) Close() {
	if c.locks != nil {
		_ = c.locks.Close()
	}
	if c.db != nil {
		_ = c.db.Close()
	}
	if c.rdb != nil {
		_ = c.rdb.Close()
	}
}
