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
	return dispatch(ctx, "billingctl", usage, map[string]command{"migrate": runMigrate, "quota": runQuota, "dlq": runDLQ}, args, stdout, stderr)
}

// command is a subcommand, given the arguments after its name.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// dispatch runs the command args[0] names, prints usage for help, and
// rejects anything else.
func dispatch(ctx context.Context, name, usage string, cmds map[string]command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	if cmd, ok := cmds[args[0]]; ok {
		return cmd(ctx, args[1:], stdout, stderr)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", name, args[0], usage)
	return errUsage
}
