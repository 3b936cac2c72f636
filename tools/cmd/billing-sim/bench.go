package main

import (
	"context"
	"errors"
	"strings"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/tools/internal/bench"
)

// errChecksFailed: a strategy failed or a correctness check did not pass.
var errChecksFailed = errors.New("bench: a strategy failed or did not pass its checks")

type benchFlags struct {
	cfg        bench.Config
	strategies string
	skew       skewFlags
	mysqlDSN   string
	redis      string
	jsonFile   string
	output     string
}

const benchUsage = `billing-sim bench: the same workload through each write strategy against MySQL and Redis

  billing-sim bench [--strategies rowlock,redis-per-event,pipeline] [--events N] [--callers N] [--json-file F] [--output text|json] ...

Prints a table (or with --output json the report); --json-file also writes the
report to a file. Deadlocks are the server's Innodb_deadlocks while each
strategy ran: server-wide, so other sessions' deadlocks count too. Exit codes:
0 every check held, 1 failed or a check did not hold, 2 bad command line or
environment.
`

func parseBenchFlags(args []string, d deps) (benchFlags, error) {
	f := benchFlags{cfg: bench.DefaultConfig()}
	c := &f.cfg
	fs := d.flags("bench", benchUsage)
	fs.StringVar(&f.strategies, "strategies", strings.Join(bench.StrategyNames(), ","), "strategies to run, in order (rowlock is the baseline)")
	fs.IntVar(&c.Events, "events", c.Events, "events per strategy")
	fs.IntVar(&c.Merchants, "merchants", c.Merchants, "number of merchants")
	f.skew.register(fs, bench.DefaultHot)
	fs.IntVar(&c.Callers, "callers", c.Callers, "concurrent callers per strategy")
	fs.IntVar(&c.Batch, "batch", c.Batch, "largest lane batch of a batched strategy")
	fs.Int64Var(&c.Quota, "quota", c.Quota, "quota granted to every merchant (small values make rejections)")
	fs.Int64Var(&c.MinAmount, "min-amount", c.MinAmount, "smallest amount")
	fs.Int64Var(&c.MaxAmount, "max-amount", c.MaxAmount, "largest amount")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "workload seed")
	fs.DurationVar(&c.LockTTL, "lock-ttl", d.cfg.LockTTL, "merchant lock TTL of redis-per-event (default LOCK_TTL)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the databases and Redis keys for inspection")
	fs.StringVar(&f.mysqlDSN, "mysql-dsn", "", "admin DSN of the server (default BILLING_BENCH_MYSQL_DSN, else MYSQL_DSN's server, else "+bench.DefaultAdminDSN+")")
	fs.StringVar(&f.redis, "redis", strings.Join(d.cfg.Redis.Addrs, ","), "Redis address(es) (default REDIS_ADDR)")
	fs.StringVar(&f.jsonFile, "json-file", "", "also write the report as JSON to this file")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.output = *output
	return f, nil
}

func runBench(ctx context.Context, args []string, d deps) error {
	f, err := parseBenchFlags(args, d)
	if err != nil {
		return err
	}
	cfg := f.cfg
	if cfg.Strategies, err = bench.ParseStrategies(f.strategies); err != nil {
		return err
	}
	if cfg.Skew, err = f.skew.value(); err != nil {
		return err
	}
	if cfg.AdminDSN, err = bench.AdminDSN(f.mysqlDSN, d.getenv); err != nil {
		return err
	}
	cfg.KeyPrefix = d.cfg.Redis.KeyPrefix + bench.DefaultKeyPrefix
	rdb, _, err := dialRedis(d, f.redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rep, err := bench.Run(ctx, cfg, rdb, d.log)
	if rep != nil {
		if f.output == cli.JSON {
			err = errors.Join(err, printJSON(d.stdout, rep))
		} else {
			err = errors.Join(err, writeBenchTable(d.stdout, rep))
		}
		if f.jsonFile != "" {
			err = errors.Join(err, writeJSON(f.jsonFile, rep))
		}
		if err == nil && !rep.OK() {
			err = errChecksFailed
		}
	}
	return err
}
