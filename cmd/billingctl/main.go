// Command billingctl is the operator's tool: schema migrations, quota grants
// and views, refunds, and the dead-letter queue.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/logging"
)

// The help is made of these and the synopsis of every command in the table.
const (
	usageHead = "billingctl: operate the billing system"
	usageFoot = `Run 'billingctl COMMAND --help' for a command's flags. Exit codes: 0 done,
1 failed, 2 bad command line or environment (nothing was done), 3 a merchant
unknown to billing (quota show, alerts, policy, plan, shards; nothing was
changed), a grant unknown (quota revoke) or an event nothing names (event show). Connections come from the
environment (MYSQL_DSN, REDIS_ADDR, KAFKA_BROKERS, ...: see README).
`
)

// exitUnknown is the exit code of a quota command for a merchant without a balance row.
const exitUnknown = 3

// errUnknownMerchant: the merchant has no merchant_balance row.
var errUnknownMerchant = errors.New("merchant unknown to billing (no merchant_balance row)")

func main() {
	// go-redis and the MySQL driver log process-wide: through zap, warnings only.
	if log, err := logging.Build(logging.Options{Level: "warn", Format: os.Getenv("LOG_FORMAT")}); err == nil {
		redis.SetLogger(logging.Redis(log))
		_ = mysql.SetLogger(logging.MySQLDriver(log))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is the whole program but for the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	err := (&ctl{stdout: stdout, stderr: stderr, getenv: getenv}).run(ctx, args)
	code := cli.Code(err)
	if errors.Is(err, errUnknownMerchant) || errors.Is(err, errUnknownEvent) || errors.Is(err, ledger.ErrUnknownGrant) {
		code = exitUnknown
	}
	if code != cli.ExitOK && !errors.Is(err, cli.ErrUsage) {
		logging.Failure(stderr, "billingctl", getenv("LOG_FORMAT"), err)
	}
	return code
}

// ctl is one invocation: its output streams and environment.
type ctl struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (c *ctl) run(ctx context.Context, args []string) error {
	cmds := c.commands()
	return cli.Dispatch(ctx, "billingctl", cli.Usage(usageHead, cmds, usageFoot), cmds, args, c.stdout, c.stderr)
}

func (c *ctl) commands() []cli.Command {
	return []cli.Command{
		{Name: "migrate", Usage: migrateUsage, Run: c.runMigrate},
		{Name: "quota", Usage: c.quotaUsage(), Run: c.runQuota},
		{Name: "payment", Usage: c.paymentUsage(), Run: c.runPayment},
		{Name: "dlq", Usage: dlqUsage, Run: c.runDLQ},
		{Name: "event", Usage: eventUsage, Run: c.runEvent},
	}
}

// flags returns the flag set of a subcommand.
func (c *ctl) flags(name, usage string) *cli.FlagSet {
	return cli.NewFlagSet("billingctl "+name, usage, c.stdout, c.stderr)
}
