package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/reconcile"
)

// Output formats of the run report.
const outputText, outputJSON = cli.Text, cli.JSON

const usage = `reconciler: compare every merchant's Redis quota with MySQL, report and repair drift

  reconciler [--once] [--dry-run] [--merchant M,..] [--fail-on-repair] [--output text|json] ...
  reconciler --every 5m [...]
  reconciler export --from T1 --to T2 [...]   (statements: reconciler export --help)

Exit code of a single run: 0 clean or every drift repaired, 1 drift left (dry run,
over --repair-ceiling, critical or aborted), 2 bad command line or environment,
3 the run failed, 4 drift repaired with --fail-on-repair. A missing quota hash
(missing_key) is reported and hydrated, never drift. The loop exits 0 on SIGTERM.
Connections come from the environment (MYSQL_DSN, REDIS_ADDR, ...: see README).
`

// options is the command line of the reconciler program.
type options struct {
	Config       reconcile.Config
	Every        time.Duration // 0: run once (--once, the default)
	Output       string        // outputText or outputJSON
	FailOnRepair bool          // a run that repaired drift exits 4
}

// parseFlags parses the reconciler's command line: help and the version go to
// stdout (cli.ErrDone), problems to stderr (cli.ErrUsage).
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	c := &o.Config
	var once, hydrate bool
	fs := cli.NewFlagSet("reconciler", usage, stdout, stderr)
	fs.BoolVar(&once, "once", false, "run once and exit (the default)")
	fs.BoolVar(&o.FailOnRepair, "fail-on-repair", false, "exit 4 when the run repaired drift (default: 0, as clean)")
	fs.DurationVar(&o.Every, "every", 0, "run in a loop with this period (e.g. 5m) until SIGTERM")
	fs.BoolVar(&c.DryRun, "dry-run", false, "report only: never write Redis (audit rows are written)")
	merchantsFlag(fs, "check only this merchant (repeatable, or comma-separated)", &c.Merchants)
	fs.IntVar(&c.Concurrency, "concurrency", reconcile.DefaultConcurrency, "pages of merchants checked at once")
	fs.IntVar(&c.PageSize, "page", reconcile.DefaultPageSize, "merchants per page")
	fs.DurationVar(&c.Grace, "grace", reconcile.DefaultGrace, "pending deductions younger than this are in-flight work, not drift")
	fs.Int64Var(&c.RepairCeiling, "repair-ceiling", reconcile.DefaultRepairCeiling, "absolute change of remain above which drift is reported but not repaired (0: no ceiling)")
	fs.DurationVar(&c.LockTTL, "lock-ttl", reconcile.DefaultLockTTL, "TTL of the reconciler's hold on a merchant lock")
	fs.BoolVar(&hydrate, "hydrate-missing", true, "hydrate a missing quota hash from merchant_balance (set only if absent)")
	fs.BoolVar(&c.LedgerFull, "ledger-full", false, "audit the whole ledger, ignoring and rewriting the checkpoints")
	fs.DurationVar(&c.BusyRetryDelay, "busy-retry-delay", reconcile.DefaultBusyRetryDelay, "pause before merchants found busy are tried once more")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o.Output = *output
	c.SkipHydrate = !hydrate
	var errs []error
	if once && o.Every != 0 {
		errs = append(errs, errors.New("--once and --every exclude each other"))
	}
	if o.Every < 0 || (o.Every > 0 && o.Every < time.Second) {
		errs = append(errs, fmt.Errorf("--every %v is below 1s", o.Every))
	}
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		return options{}, fs.Fail("%v", err)
	}
	return o, nil
}

// merchantsFlag registers --merchant, repeatable or comma-separated, into dst.
func merchantsFlag(fs *cli.FlagSet, usage string, dst *[]string) {
	fs.Func("merchant", usage, func(v string) error {
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				*dst = append(*dst, m)
			}
		}
		return nil
	})
}
