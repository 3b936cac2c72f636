package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/quotaevent"
)

const alertsUsage = `billingctl quota alerts: set a merchant's low-balance thresholds

  billingctl quota alerts --merchant M --low 1000 --low 10% [--output text|json]
  billingctl quota alerts --merchant M --none | --default

--low takes units or a percentage of the balance the merchant's last credit or
expiry left (at most one of each; when both come to the same units they are one
threshold); quota.low is published when a payment takes the balance below one,
quota.recovered when a grant lifts it back. --none sets no threshold, --default
returns the merchant to QUOTA_LOW_DEFAULT. The next ledger transaction uses them.
Exit codes: 0 set, 1 failed, 2 bad command line or environment, 3 merchant unknown to billing.
`

// lowFlags collects repeated --low values.
type lowFlags []string

func (l *lowFlags) String() string     { return strings.Join(*l, ",") }
func (l *lowFlags) Set(v string) error { *l = append(*l, v); return nil }

// alertsResult is what quota alerts prints.
type alertsResult struct {
	MerchantID string `json:"merchant_id"`
	Low        string `json:"low"`     // as set: "1000,10%", "none", or the default's
	Default    bool   `json:"default"` // the merchant follows QUOTA_LOW_DEFAULT
}

func (c *ctl) runAlerts(ctx context.Context, args []string) error {
	fs := c.flags("quota alerts", alertsUsage)
	merchant := fs.String("merchant", "", "merchant id")
	var low lowFlags
	fs.Var(&low, "low", "a threshold: units (1000) or a percentage of the balance after the last credit or expiry (10%); repeatable")
	none := fs.Bool("none", false, "no threshold")
	def := fs.Bool("default", false, "follow QUOTA_LOW_DEFAULT")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !event.ValidID(*merchant) {
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	}
	chosen := 0
	for _, set := range []bool{len(low) > 0, *none, *def} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return fs.Fail("give --low (once or twice), --none or --default")
	}
	var alerts *quotaevent.Alerts
	switch {
	case *none:
		alerts = &quotaevent.Alerts{}
	case len(low) > 0:
		a, err := quotaevent.ParseAlerts(low.String())
		if err != nil || a.IsZero() {
			return fs.Fail("--low %s: %v", low.String(), err)
		}
		alerts = &a
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	if err := op.Ledger.SetAlerts(ctx, *merchant, alerts); err != nil {
		return unknownMerchant(err, *merchant)
	}
	res := alertsResult{MerchantID: *merchant, Default: alerts == nil}
	if alerts == nil {
		alerts = &op.DefaultAlerts
	}
	res.Low = alerts.String()
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	from := ""
	if res.Default {
		from = " (the default, QUOTA_LOW_DEFAULT)"
	}
	_, err = fmt.Fprintf(c.stdout, "merchant %s: low thresholds %s%s\n", res.MerchantID, res.Low, from)
	return err
}
