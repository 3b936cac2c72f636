package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
)

const policyUsage = `billingctl quota policy: set a merchant's overdraft policy

  billingctl quota policy --merchant M --reject | --floor N | --overage [--output text|json]

--reject (the default): no payment takes the balance below 0. --floor N: down to
-N. --overage: never rejects; what a payment takes below 0 is recorded on its
ledger row as overage, for postpaid billing. MySQL enforces it from the next
transaction on; the merchant's quota cache is dropped and reloaded with it.
Exit codes: 0 set, 1 failed, 2 bad command line or environment, 3 merchant unknown to billing.
`

// policyResult is what quota policy prints.
type policyResult struct {
	MerchantID string `json:"merchant_id"`
	Policy     string `json:"policy"`
	Floor      int64  `json:"floor"`
}

func (c *ctl) runPolicy(ctx context.Context, args []string) error {
	fs := c.flags("quota policy", policyUsage)
	merchant := fs.String("merchant", "", "merchant id")
	reject := fs.Bool("reject", false, "never below 0 (the default)")
	floor := fs.Int64("floor", 0, "may go down to -N")
	overage := fs.Bool("overage", false, "never reject; record the part below 0 as overage")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !event.ValidID(*merchant) {
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	}
	floorSet := false
	fs.Visit(func(f *flag.Flag) { floorSet = floorSet || f.Name == "floor" })
	p, chosen := ledger.Policy{Kind: ledger.PolicyReject}, 0
	if *reject {
		chosen++
	}
	if *overage {
		p.Kind = ledger.PolicyOverage
		chosen++
	}
	if floorSet {
		if *floor < 1 || *floor > event.MaxAmount {
			return fs.Fail("--floor %d is outside 1..10^12", *floor)
		}
		p = ledger.Policy{Kind: ledger.PolicyFloor, Floor: *floor}
		chosen++
	}
	if chosen != 1 {
		return fs.Fail("give one of --reject, --floor N, --overage")
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	if err := op.Deductor.SetPolicy(ctx, *merchant, p); err != nil {
		return unknownMerchant(err, *merchant)
	}
	res := policyResult{MerchantID: *merchant, Policy: string(p.Kind), Floor: p.Floor}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "merchant %s: overdraft policy %s\n", res.MerchantID, p)
	return err
}
