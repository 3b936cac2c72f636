// Command billing-sim makes synthetic traffic: it produces payment events to
// Kafka, benchmarks write strategies against MySQL and Redis, runs the
// whole system on one machine (demo), and measures the billing-worker
// binary black-box (load).
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/logging"
)

const usage = `billing-sim: synthetic traffic for the billing system

  billing-sim produce [--total N | --rate N/s] [--merchants N] [--hot SHARE | --skew zipf:S] [--duplicates F] [--malformed F] [--output text|json] ...
  billing-sim bench   [--strategies rowlock,redis-per-event,pipeline] [--events N] [--callers N] [--json-file F] [--output text|json] ...
  billing-sim demo    [--events N] [--merchants N] [--rate N] [--keep] [--brokers host:port] [--output text|json] ...
  billing-sim load    [--workers N] [--events N] [--ledger-rows N] [--rate N | --soak 10m] [--json-file F] [--output text|json] ...

Run 'billing-sim COMMAND --help' for its flags. Exit codes: 0 done, 1 failed (a
demo or bench check that does not hold included), 2 bad command line or
environment. Connections default to the environment (KAFKA_BROKERS,
KAFKA_TOPIC, REDIS_ADDR, MYSQL_DSN, LOG_LEVEL: see README).
`

// errUsage means the command line was wrong; the problem has been printed.
var errUsage = cli.ErrUsage

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// deps is what every subcommand gets: the environment's configuration, a
// logger and the output streams.
type deps struct {
	cfg            config.Config
	getenv         func(string) string
	log            *zap.Logger
	stdout, stderr io.Writer
}

// flags returns the flag set of subcommand name.
func (d deps) flags(name, usage string) *cli.FlagSet {
	return cli.NewFlagSet("billing-sim "+name, usage, d.stdout, d.stderr)
}

// run is the whole program but for the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	err := dispatch(ctx, args, stdout, stderr, getenv)
	code := cli.Code(err)
	if code != cli.ExitOK && !errors.Is(err, cli.ErrUsage) {
		logging.Failure(stderr, "billing-sim", getenv("LOG_FORMAT"), err)
	}
	return code
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	cmd := func(run func(context.Context, []string, deps) error) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error {
			d := deps{getenv: getenv, stdout: stdout, stderr: stderr}
			if helpOrVersion(args) { // answered without the environment
				d.cfg, d.log = config.Config{}, zap.NewNop()
				return run(ctx, args, d)
			}
			cfg, err := config.Load(getenv)
			if err != nil {
				return err
			}
			log, err := logging.Build(logging.Options{Level: cfg.LogLevel, Format: cfg.LogFormat, Sampling: cfg.LogSampling})
			if err != nil {
				return err
			}
			defer log.Sync() //nolint:errcheck // stderr cannot be synced on some systems
			d.cfg, d.log = cfg, log
			return run(ctx, args, d)
		}
	}
	return cli.Dispatch(ctx, "billing-sim", usage, []cli.Command{
		{Name: "produce", Run: cmd(runProduce)}, {Name: "bench", Run: cmd(runBench)},
		{Name: "demo", Run: cmd(runDemo)}, {Name: "load", Run: cmd(runLoad)},
	}, args, stdout, stderr)
}

// helpOrVersion reports whether args ask only for help or the version.
func helpOrVersion(args []string) bool {
	return len(args) == 1 && slices.Contains([]string{"-h", "-help", "--help", "-version", "--version"}, args[0])
}
