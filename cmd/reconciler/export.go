package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/statement"
)

// Exit codes of `reconciler export` beyond the shared ones.
const (
	exitTieOut   = 1 // a merchant's statement does not tie out (named on stderr)
	exitLockLost = 5 // the job lock was lost: the export stopped, its output removed
	exitBusy     = 6 // another export of the period and merchant set holds the job lock
)

const exportUsage = `reconciler export: write the statements of a period, checked as they stream

  reconciler export --from T1 --to T2 [--merchant M,..] [--format csv|jsonl] [--out FILE|DIR|-]
  reconciler export --previous day|month [...]

Per merchant (every merchant with a balance row, or those of --merchant): the
opening balance at T1, every ledger row recorded in (T1, T2] in ledger order,
totals by kind and the closing balance at T2; then a trailer with the counts
and the SHA-256 of every byte before it. T1 and T2 are RFC 3339 times or dates
(midnight UTC). One consistent snapshot; a job lock in Redis per period and
merchant set, renewed for as long as the export runs. A file is written beside
its name and renamed into place when complete; a directory gets
statements-<from>-<to>.<format> (with --merchant: -<set> before the format).

Exit code: 0 written, 1 a statement does not tie out (the merchant is named;
nothing is left), 2 bad command line or environment, an unknown merchant or a
period not over, 3 the export failed, 5 the job lock was lost (nothing is
left), 6 another export of the same period and merchants runs (see --wait).
`

// exportOptions is the command line of `reconciler export`.
type exportOptions struct {
	statement.Options
	MetricsFile string
}

func parseExportFlags(args []string, stdout, stderr io.Writer, now time.Time) (exportOptions, error) {
	var o exportOptions
	var from, to, previous string
	fs := cli.NewFlagSet("reconciler export", exportUsage, stdout, stderr)
	fs.StringVar(&from, "from", "", "start of the period, excluded (RFC 3339 or YYYY-MM-DD)")
	fs.StringVar(&to, "to", "", "end of the period, included (RFC 3339 or YYYY-MM-DD)")
	fs.StringVar(&previous, "previous", "", "the period before the current one in UTC, instead of --from/--to: day or month")
	merchantsFlag(fs, "only this merchant (repeatable, or comma-separated)", &o.Merchants)
	fs.StringVar(&o.Format, "format", statement.FormatJSONL, "csv or jsonl")
	fs.StringVar(&o.Out, "out", "-", "file, existing directory, or - for stdout")
	fs.DurationVar(&o.Wait, "wait", 0, "wait this long for another export of the same period and merchants (0: exit 6 at once)")
	fs.DurationVar(&o.LockTTL, "lock-ttl", 0, "TTL of the job lock, renewed every third of it (default LOCK_TTL)")
	fs.DurationVar(&o.Settle, "settle", statement.DefaultSettle, "a period must have ended this long before the snapshot (rows still committing)")
	fs.IntVar(&o.Page, "page", ledgerdb.DefaultStatementPage, "merchants read per query")
	fs.StringVar(&o.MetricsFile, "metrics-file", "", "after success, write the export's metrics here (Prometheus text format)")
	if err := fs.Parse(args); err != nil {
		return exportOptions{}, err
	}
	if o.Settle == 0 {
		o.Settle = -1 // said so: none (0 in Options is the default)
	}
	var errs []error
	var err error
	switch {
	case previous != "" && (from != "" || to != ""):
		errs = append(errs, errors.New("--previous and --from/--to exclude each other"))
	case previous != "":
		o.Period, err = previousPeriod(previous, now)
		errs = append(errs, err)
	case from == "" || to == "":
		errs = append(errs, errors.New("--from and --to (or --previous) are required"))
	default:
		o.Period.From, err = parseTime("--from", from)
		errs = append(errs, err)
		o.Period.To, err = parseTime("--to", to)
		errs = append(errs, err)
	}
	if o.Page <= 0 {
		errs = append(errs, fmt.Errorf("--page %d must be positive", o.Page))
	}
	if err := errors.Join(errs...); err != nil {
		return exportOptions{}, fs.Fail("%v", err)
	}
	if err := o.Validate(); err != nil {
		return exportOptions{}, fs.Fail("%v", err)
	}
	return o, nil
}

func parseTime(flag, v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is neither an RFC 3339 time nor a date (YYYY-MM-DD)", flag, v)
}

// previousPeriod is the UTC day or month before the one now is in.
func previousPeriod(unit string, now time.Time) (ledger.Period, error) {
	now = now.UTC()
	switch unit {
	case "day":
		end := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		return ledger.Period{From: end.AddDate(0, 0, -1), To: end}, nil
	case "month":
		end := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return ledger.Period{From: end.AddDate(0, -1, 0), To: end}, nil
	}
	return ledger.Period{}, fmt.Errorf("--previous %q is not day or month", unit)
}

// runExport is `reconciler export`: it returns the exit code.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, err := parseExportFlags(args, stdout, stderr, time.Now())
	if err != nil {
		return cli.Code(err)
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		logging.Failure(stderr, "reconciler export", getenv("LOG_FORMAT"), err)
		return cli.ExitUsage
	}
	log, err := logging.Build(logging.Options{Level: cfg.LogLevel, Format: cfg.LogFormat}) // stderr: stdout may be the export
	if err != nil {
		logging.Failure(stderr, "reconciler export", cfg.LogFormat, err)
		return cli.ExitUsage
	}
	defer func() { _ = log.Sync() }()
	o.Stdout, o.Logger = stdout, log
	if o.LockTTL == 0 {
		o.LockTTL = cfg.LockTTL
	}
	err = export(ctx, cfg, o, log)
	if err != nil {
		logging.Failure(stderr, "reconciler export", cfg.LogFormat, err)
	}
	return exportCode(err)
}

func exportCode(err error) int {
	switch {
	case err == nil:
		return cli.ExitOK
	case errors.Is(err, ledger.ErrTieOut):
		return exitTieOut
	case errors.Is(err, lock.ErrLost):
		return exitLockLost
	case errors.Is(err, statement.ErrBusy):
		return exitBusy
	case errors.Is(err, statement.ErrPeriodOpen), errors.Is(err, ledger.ErrUnknownMerchant):
		return cli.ExitUsage
	}
	return exitFailed
}

// export wires the clients, runs the export and writes the metrics file.
func export(ctx context.Context, cfg config.Config, o exportOptions, log *zap.Logger) error {
	c, err := dialClients(ctx, cfg, lock.Options{Logger: log}, log)
	if err != nil {
		return err
	}
	defer c.Close()
	// Only the export's own figures: a textfile read after the process
	// exited has no use for its Go runtime's.
	reg := prometheus.NewRegistry()
	m, err := statement.NewMetrics(reg)
	if err != nil {
		return err
	}
	sum, err := statement.Export(ctx, c.db, c.locks, c.keys, o.Options)
	if err != nil {
		return err
	}
	m.Succeeded(sum)
	if o.MetricsFile != "" {
		if err := prometheus.WriteToTextfile(o.MetricsFile, reg); err != nil {
			return fmt.Errorf("the export is written (%s), its metrics file is not: %w", sum.Path, err)
		}
	}
	return nil
}
