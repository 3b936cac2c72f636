package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/app"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/logging"
)

func runQuota(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	fs := newFlagSet("quota "+args[0], stderr)
	merchant := fs.String("merchant", "", "merchant id")
	amount := fs.Int64("amount", 0, "quota units to grant (grant)")
	id := fs.String("id", "", "grant id: granting the same id twice credits once (grant)")
	output := fs.String("output", "text", "text or json (show)")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	bad := false
	check := func(ok bool, format string, arg any) {
		if !ok {
			bad = true
			fmt.Fprintf(stderr, "billingctl: "+format+"\n", arg)
		}
	}
	check(event.ValidID(*merchant), "--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	switch args[0] {
	case "grant":
		check(*amount >= 1 && *amount <= event.MaxAmount, "--amount %d is outside 1..10^12", *amount)
		check(event.ValidID(*id), "--id %q is not 1..64 characters of [A-Za-z0-9_.:-]", *id)
	case "show":
		check(validOutput(*output), "--output %q is not text or json", *output)
	default:
		fmt.Fprintf(stderr, "billingctl: unknown quota command %q\n\n%s", args[0], usage)
		return errUsage
	}
	if bad {
		return errUsage
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	level := cfg.LogLevel
	if os.Getenv("LOG_LEVEL") == "" {
		level = "warn" // a person is reading stdout; the lease chatter is noise unless asked for
	}
	log, err := logging.New(level)
	if err != nil {
		return err
	}
	op, err := app.NewOperator(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := op.Close(); err != nil {
			log.Warn("closing", zap.Error(err))
		}
	}()
	if args[0] == "grant" {
		outcome, err := op.Deductor.Grant(ctx, *merchant, *amount, *id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "grant %s: %s (%d to %s)\n", *id, outcome, *amount, *merchant)
		return nil
	}
	view, err := op.Deductor.Show(ctx, *merchant)
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return writeView(stdout, view)
}

func writeView(w io.Writer, v deduct.View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "merchant\t%s\n", v.MerchantID)
	if !v.Known {
		fmt.Fprintf(tw, "mysql\tunknown to billing (no merchant_balance row)\n")
	} else {
		fmt.Fprintf(tw, "mysql credited\t%d\n", v.Credited)
		fmt.Fprintf(tw, "mysql debited\t%d\n", v.Debited)
		fmt.Fprintf(tw, "expected remain\t%d\t(credited - debited - pending not yet in the ledger)\n", v.Expected)
	}
	if v.Cached {
		fmt.Fprintf(tw, "redis remain\t%d\t(ver %d)\n", v.Remain, v.Ver)
		fmt.Fprintf(tw, "drift\t%d\n", v.Drift)
	} else {
		fmt.Fprintf(tw, "redis remain\tnot loaded\t(hydrated from MySQL on the next deduction)\n")
	}
	fmt.Fprintf(tw, "pending\t%d\n", len(v.Pending))
	for _, p := range v.Pending {
		state := "not in the ledger"
		if p.InLedger {
			state = "in the ledger, settle pending"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s old, %s\n", p.EventID, p.Amount, p.Age.Round(time.Millisecond), state)
	}
	return tw.Flush()
}
