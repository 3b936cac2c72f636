package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/plan"
)

const planUsage = `billingctl quota plan: grant a merchant quota every period (a recurring plan)

  billingctl quota plan --merchant M --amount N --every 1mo [--rollover-max R] [--priority P] [--anchor T] [--output text|json]
  billingctl quota plan ls [--output text|json]
  billingctl quota plan cancel --merchant M [--output text|json]

--every is Nmo (calendar months), Nd (days) or a duration (12h). Periods start
at --anchor (RFC 3339; default now) and every period after it. The workers
issue each period's grant once, at its start (within about a second), as grant
plan:M:<unix start>, expiring at the next period's start; --rollover-max
carries up to R of its remainder into the next period. A worker that was down
at a period start issues that period's grant late, with the same expiry;
periods missed entirely are not issued. Setting a plan again replaces it.
Needs MySQL only. Exit codes: 0 set, 1 failed, 2 bad command line or
environment, 3 merchant unknown to billing (nothing was changed).
`

const planLsUsage = `billingctl quota plan ls: list the recurring plans, with each one's next period

  billingctl quota plan ls [--output text|json]

NEXT PERIOD is the start of the first period not issued yet. Needs MySQL only.
Exit codes: 0 listed (none included), 1 failed, 2 bad command line or environment.
`

const planCancelUsage = `billingctl quota plan cancel: end a merchant's recurring plan

  billingctl quota plan cancel --merchant M [--output text|json]

No period after the current one is issued; the current period keeps its grant
until that expires. Cancelling a merchant without a plan changes nothing.
Needs MySQL only. Exit codes: 0 cancelled or no plan, 1 failed, 2 bad command
line or environment, 3 merchant unknown to billing.
`

// planResult is what quota plan prints.
type planResult struct {
	MerchantID  string    `json:"merchant_id"`
	Amount      int64     `json:"amount"`
	Every       string    `json:"every"`
	RolloverMax int64     `json:"rollover_max"`
	Priority    int       `json:"priority"`
	Anchor      time.Time `json:"anchor"`
	NextStart   time.Time `json:"next_start"` // of the first period not issued yet
}

func newPlanResult(p plan.Plan) planResult {
	return planResult{MerchantID: p.MerchantID, Amount: p.Amount, Every: p.Every.String(), RolloverMax: p.RolloverMax,
		Priority: p.Priority, Anchor: p.Anchor.UTC(), NextStart: p.NextStart.UTC()}
}

func (c *ctl) runPlan(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "ls" || args[0] == "cancel") {
		return c.runPlanOf(ctx, args[0], args[1:])
	}
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
	op, closeOp, err := c.operator(ctx, false)
	if err != nil {
		return err
	}
	defer closeOp()
	if err := op.Plans.Set(ctx, p); err != nil {
		return unknownMerchant(err, p.MerchantID)
	}
	p, _, err = op.Plans.Get(ctx, p.MerchantID)
	if err != nil {
		return err
	}
	res := newPlanResult(p)
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "merchant %s: plan of %d every %s from %s (rollover max %d, priority %d)\n",
		res.MerchantID, res.Amount, res.Every, res.Anchor.Format(time.RFC3339), res.RolloverMax, res.Priority)
	return err
}

// planCancelled is what quota plan cancel prints.
type planCancelled struct {
	MerchantID string `json:"merchant_id"`
	Cancelled  bool   `json:"cancelled"` // false: it had no plan
}

// runPlanOf runs quota plan ls or quota plan cancel.
func (c *ctl) runPlanOf(ctx context.Context, verb string, args []string) error {
	fs := c.flags("quota plan "+verb, map[string]string{"ls": planLsUsage, "cancel": planCancelUsage}[verb])
	var merchant *string
	if verb == "cancel" {
		merchant = fs.String("merchant", "", "merchant id")
	}
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if merchant != nil && !event.ValidID(*merchant) {
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	}
	op, closeOp, err := c.operator(ctx, false)
	if err != nil {
		return err
	}
	defer closeOp()
	if verb == "cancel" {
		had, err := op.Plans.Cancel(ctx, *merchant)
		if err != nil {
			return unknownMerchant(err, *merchant)
		}
		if *output == cli.JSON {
			return writeJSON(c.stdout, planCancelled{MerchantID: *merchant, Cancelled: had})
		}
		_, err = fmt.Fprintf(c.stdout, "merchant %s: %s\n", *merchant, map[bool]string{true: "plan cancelled", false: "had no plan"}[had])
		return err
	}
	plans, err := op.Plans.List(ctx)
	if err != nil {
		return err
	}
	res := make([]planResult, len(plans))
	for i, p := range plans {
		res[i] = newPlanResult(p)
	}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MERCHANT\tAMOUNT\tEVERY\tROLLOVER MAX\tPRIORITY\tANCHOR\tNEXT PERIOD")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", r.MerchantID, r.Amount, r.Every, r.RolloverMax, r.Priority,
			r.Anchor.Format(time.RFC3339), r.NextStart.Format(time.RFC3339))
	}
	return tw.Flush()
}

// unknownMerchant is err, as errUnknownMerchant when the ledger does not know merchant.
func unknownMerchant(err error, merchant string) error {
	if errors.Is(err, ledger.ErrUnknownMerchant) {
		return fmt.Errorf("%s: %w", merchant, errUnknownMerchant)
	}
	return err
}
