// Command billingctl is the operator's tool: schema migrations, quota grants
// and views, and the dead-letter queue.
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
)

const usage = `billingctl: operate the billing system

  billingctl migrate [--status | --down N | --force VERSION]
  billingctl quota grant --merchant M --amount N --id GRANT_ID
  billingctl quota show --merchant M [--output json]
  billingctl dlq ls [--list] [--output json]
  billingctl dlq replay [filters] [--dry-run] [--rate N]

Connections come from the environment (MYSQL_DSN, REDIS_ADDR, KAFKA_BROKERS, ...: see README).
`

// errUsage means the command line was wrong; usage has been printed.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "billingctl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "quota":
		return runQuota(ctx, rest, stdout, stderr)
	case "dlq":
		return runDLQ(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "billingctl: unknown command %q\n\n%s", sub, usage)
	return errUsage
}
