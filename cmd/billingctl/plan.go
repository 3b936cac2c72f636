package main

import (
	"context"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/plan"
)

const planUsage = `billingctl quota plan: grant a merchant quota every period (a recurring plan)

  billingctl quota plan --merchant M --amount N --every 1mo [--rollover-max R] [--priority P] [--anchor T] [--output text|json]

--every is Nmo (calendar months), Nd (days) or a duration (12h). Periods start
at --anchor (RFC 3339; default now) and every period after it. The workers
issue each period's grant once, at its start (within about a second), as grant
plan:M:<unix start>, expiring at the next period's start; --rollover-max
carries up to R of its remainder into the next period. A worker that was down
at a period start issues that period's grant late, with the same expiry;
periods missed entirely are not issued. Setting a plan again replaces it.
Exit codes: 0 set, 1 failed, 2 bad command line or environment.
`

// planResult is what quota plan prints.
type planResult struct {
	MerchantID  string    `json:"merchant_id"`
	Amount      int64     `json:"amount"`
	Every       string    `json:"every"`
	RolloverMax int64     `json:"rollover_max"`
	Priority    int       `json:"priority"`
	Anchor      time.Time `json:"anchor"`
}

func (c *ctl) runPlan(ctx context.Context, args []string) error {
	fs := c.flags("quota plan", planUsage)
	merchant := fs.String("merchant", "", "merchant id")
	amount := fs.Int64("amount", 0, "quota units per period, 1..10^12")
	every := fs.String("every", "", "period: Nmo, Nd or a duration")
	rollover := fs.Int64("rollover-max", 0, "carry up to this much of a period's remainder into the next")
	prio := fs.Int("priority", event.DefaultGrantPriority, "burn-down priority of the plan's grants, 0..100")
	anchor := fs.String("anchor", "", "RFC 3339 start of the first period (default now)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := plan.Plan{MerchantID: *merchant, Amount: *amount, RolloverMax: *rollover, Priority: *prio, Anchor: time.Now().UTC().Truncate(time.Microsecond)}
	var err error
	if p.Every, err = plan.ParseEvery(*every); err != nil {
		return fs.Fail("--every: %v", err)
	}
	if *anchor != "" {
		if p.Anchor, err = time.Parse(time.RFC3339Nano, *anchor); err != nil {
			return fs.Fail("--anchor %q is not an RFC 3339 time", *anchor)
		}
	}
	switch {
	case !event.ValidID(*merchant):
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	case *amount < 1 || *amount > event.MaxAmount:
		return fs.Fail("--amount %d is outside 1..10^12", *amount)
	case *prio < event.MinGrantPriority || *prio > event.MaxGrantPriority:
		return fs.Fail("--priority %d is outside 0..100", *prio)
	case *rollover < 0 || *rollover > event.MaxAmount:
		return fs.Fail("--rollover-max %d is outside 0..10^12", *rollover)
	}
	op, closeOp, err := c.operator(ctx)
	if err != nil {
		return err
	}
	defer closeOp()
	if err := op.Plans.Set(ctx, p); err != nil {
		return err
	}
	res := planResult{MerchantID: p.MerchantID, Amount: p.Amount, Every: p.Every.String(), RolloverMax: p.RolloverMax, Priority: p.Priority, Anchor: p.Anchor.UTC()}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "merchant %s: plan of %d every %s from %s (rollover max %d, priority %d)\n",
		res.MerchantID, res.Amount, res.Every, res.Anchor.Format(time.RFC3339), res.RolloverMax, res.Priority)
	return err
}
