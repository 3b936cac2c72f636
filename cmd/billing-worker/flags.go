package main

import (
	"io"

	"github.com/quotaflow/billing/internal/cli"
)

const usage = `billing-worker: consume payment.succeeded, deduct quota, write the ledger, dead-letter poison events

  billing-worker [--help | --version]

Configured by the environment only (KAFKA_BROKERS, MYSQL_DSN, REDIS_ADDR,
IDGEN_WORKER_ID or POD_NAME, ...: see the README's Configuration table).
Serves /metrics, /healthz and /readyz on HTTP_ADDR. Exit codes: 0 stopped
cleanly (SIGTERM or SIGINT), 1 failed, 2 bad command line or environment,
130 a second signal while draining.
`

// parseArgs handles the command line, which only asks for help or the
// version: cli.ErrDone when it did, cli.ErrUsage for anything else.
func parseArgs(args []string, stdout, stderr io.Writer) error {
	return cli.NewFlagSet("billing-worker", usage, stdout, stderr).Parse(args)
}
