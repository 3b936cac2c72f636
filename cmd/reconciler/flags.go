package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/reconcile"
)

// Output formats of the run report.
const outputText, outputJSON = "text", "json"

// options is the command line of the reconciler program.
type options struct {
	Config reconcile.Config
	Every  time.Duration // 0: run once (--once, the default)
	Output string        // outputText or outputJSON
}

// parseFlags parses the reconciler's command line. Usage and errors go to out.
// -h returns flag.ErrHelp.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	c := &o.Config
	var once, hydrate bool
	fs := flag.NewFlagSet("reconciler", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&once, "once", false, "run once and exit (the default; exit code 0 clean, 1 drift found, 2 repaired, 3 failed)")
	fs.DurationVar(&o.Every, "every", 0, "run in a loop with this period (e.g. 5m) until SIGTERM")
	fs.BoolVar(&c.DryRun, "dry-run", false, "report only: never write Redis (audit rows are written)")
	fs.Func("merchant", "check only this merchant (repeatable, or comma-separated)", func(v string) error {
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				c.Merchants = append(c.Merchants, m)
			}
		}
		return nil
	})
	fs.IntVar(&c.Concurrency, "concurrency", reconcile.DefaultConcurrency, "pages of merchants checked at once")
	fs.IntVar(&c.PageSize, "page", reconcile.DefaultPageSize, "merchants per page")
	fs.DurationVar(&c.Grace, "grace", reconcile.DefaultGrace, "pending deductions younger than this are in-flight work, not drift")
	fs.DurationVar(&c.Settle, "settle", reconcile.DefaultSettle, "extra margin before a ledger row is checkpointed, beyond the ledger's longest transaction and clock skew")
	fs.Int64Var(&c.RepairCeiling, "repair-ceiling", reconcile.DefaultRepairCeiling, "absolute change of remain above which drift is reported but not repaired (0: no ceiling)")
	fs.DurationVar(&c.LockTTL, "lock-ttl", reconcile.DefaultLockTTL, "TTL of the reconciler's hold on a merchant lock")
	fs.BoolVar(&hydrate, "hydrate-missing", true, "hydrate a missing quota hash from merchant_balance (set only if absent)")
	fs.BoolVar(&c.LedgerFull, "ledger-full", false, "audit the whole ledger, ignoring and rewriting the checkpoints")
	fs.DurationVar(&c.BusyRetryDelay, "busy-retry-delay", reconcile.DefaultBusyRetryDelay, "pause before merchants found busy are tried once more")
	fs.StringVar(&o.Output, "output", outputText, "report format: text or json")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	c.SkipHydrate = !hydrate
	var errs []error
	if once && o.Every != 0 {
		errs = append(errs, errors.New("reconciler: --once and --every exclude each other"))
	}
	if o.Every < 0 || (o.Every > 0 && o.Every < time.Second) {
		errs = append(errs, fmt.Errorf("reconciler: --every %v is below 1s", o.Every))
	}
	if o.Output != outputText && o.Output != outputJSON {
		errs = append(errs, fmt.Errorf("reconciler: --output %q is not text or json", o.Output))
	}
	if fs.NArg() > 0 {
		errs = append(errs, errors.New("reconciler: unexpected arguments after the flags"))
	}
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		fmt.Fprintln(out, err)
		return options{}, err
	}
	return o, nil
}
