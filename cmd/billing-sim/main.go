// Command billing-sim makes synthetic traffic: it produces payment events to
// Kafka, benchmarks write strategies against MySQL and Redis, runs the
// whole system on one machine (demo), and measures the billing-worker
// binary black-box (load).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/logging"
)

const usage = `billing-sim: synthetic traffic for the billing system

  billing-sim produce [--total N | --rate N/s] [--merchants N] [--hot SHARE | --skew zipf:S] [--duplicates F] [--malformed F] ...
  billing-sim bench   [--strategies rowlock,redis-per-event,pipeline] [--events N] [--callers N] [--output file.json] ...
  billing-sim demo    [--events N] [--merchants N] [--rate N] [--keep] [--brokers host:port] ...
  billing-sim load    [--workers N] [--events N] [--ledger-rows N] [--rate N | --soak 10m] [--output file.json] ...

Run a command with -h for its flags. Connections default to the environment
(KAFKA_BROKERS, KAFKA_TOPIC, REDIS_ADDR, MYSQL_DSN, LOG_LEVEL: see README).
`

// errUsage means the command line was wrong; the problem has been printed.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "billing-sim:", err)
		os.Exit(1)
	}
}

// deps is what every subcommand gets: the environment's configuration, a
// logger and the output streams.
type deps struct {
	cfg            config.Config
	getenv         func(string) string
	log            *zap.Logger
	stdout, stderr io.Writer
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	var cmd func(context.Context, []string, deps) error
	switch sub {
	case "produce":
		cmd = runProduce
	case "bench":
		cmd = runBench
	case "demo":
		cmd = runDemo
	case "load":
		cmd = runLoad
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "billing-sim: unknown command %q\n\n%s", sub, usage)
		return errUsage
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	log, err := logging.New(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr cannot be synced on some systems
	return cmd(ctx, rest, deps{cfg: cfg, getenv: getenv, log: log, stdout: stdout, stderr: stderr})
}
