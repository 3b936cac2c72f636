package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
)

const refundUsage = `billingctl payment refund: give back quota of a recorded payment (an operator's correction)

  billingctl payment refund --event E --amount N --id R [--reason refund|chargeback|correction] [--output text|json]

The same path as the payment.refunded topic: once per refund id (the same id
again: duplicate; with other terms: refused as a conflict naming what is
recorded); units go back to the grants the payment burned, last burned first,
overage the merchant still owes first, never to a grant expired since; the
refunds of a payment add up to at most its debit (the part beyond is refused,
never credited). A refund of a payment not recorded yet waits for it (outcome
pending); of a rejected payment it is void. --reason defaults to correction.
Exit codes: 0 applied, pending, void or duplicate, 1 failed or refused (a
conflict: the part within the debit, if any, is applied), 2 bad command line or
environment, 3 the event names no ledger row and no --merchant was given.
`

const refundsUsage = `billingctl payment refunds: list refunds, of one payment or those waiting for theirs

  billingctl payment refunds (--event E | --pending) [--limit N] [--output text|json]

--pending lists the refunds whose payment is not recorded (oldest first, with
their age): each applies when its payment arrives, or is cancelled by
payment cancel. Exit codes: 0 listed, 1 failed, 2 bad command line or environment.
`

const cancelUsage = `billingctl payment cancel: cancel a refund waiting for its payment

  billingctl payment cancel --id R --note TEXT [--output text|json]

The refund will not apply when its payment is recorded; the note is kept.
Exit codes: 0 cancelled, 1 failed or the refund is not pending, 2 bad command line or environment.
`

func (c *ctl) paymentCommands() []cli.Command {
	return []cli.Command{
		{Name: "refund", Usage: refundUsage, Run: c.runRefund},
		{Name: "refunds", Usage: refundsUsage, Run: c.runRefunds},
		{Name: "cancel", Usage: cancelUsage, Run: c.runCancelRefund},
	}
}

func (c *ctl) paymentUsage() string {
	return cli.Usage("billingctl payment: refund payments, list and cancel refunds",
		c.paymentCommands(), "Run 'billingctl payment COMMAND --help' for its flags.\n")
}

func (c *ctl) runPayment(ctx context.Context, args []string) error {
	return cli.Dispatch(ctx, "billingctl payment", c.paymentUsage(), c.paymentCommands(), args, c.stdout, c.stderr)
}

// refundResult is what payment refund prints.
type refundResult struct {
	RefundID   string `json:"refund_id"`
	EventID    string `json:"event_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"`
	Outcome    string `json:"outcome"`
	Refunded   int64  `json:"refunded"` // what came back
}

func (c *ctl) runRefund(ctx context.Context, args []string) error {
	fs := c.flags("payment refund", refundUsage)
	eventID := fs.String("event", "", "the payment's event id")
	amount := fs.Int64("amount", 0, "quota units to give back, 1..10^12")
	id := fs.String("id", "", "refund id: refunding the same id twice gives back once")
	merchant := fs.String("merchant", "", "the payment's merchant (needed only for a payment not recorded yet)")
	reason := fs.String("reason", ledger.ReasonCorrection, "refund, chargeback or correction")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !event.ValidID(*eventID):
		return fs.Fail("--event %q is not 1..64 characters of [A-Za-z0-9_.:-]", *eventID)
	case *amount < 1 || *amount > event.MaxAmount:
		return fs.Fail("--amount %d is outside 1..10^12", *amount)
	case !event.ValidID(*id):
		return fs.Fail("--id %q is not 1..64 characters of [A-Za-z0-9_.:-]", *id)
	case *merchant != "" && !event.ValidID(*merchant):
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	case *reason != ledger.ReasonRefund && *reason != ledger.ReasonChargeback && *reason != ledger.ReasonCorrection:
		return fs.Fail("--reason %q is not refund, chargeback or correction", *reason)
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	if *merchant == "" {
		rows, err := op.Ledger.ExistingEvents(ctx, []string{*eventID})
		if err != nil {
			return err
		}
		row, ok := rows[*eventID]
		if !ok {
			return fmt.Errorf("%w: event %s is not recorded: give --merchant to let the refund wait for it", errUnknownEvent, *eventID)
		}
		*merchant = row.MerchantID
	}
	// The worker's refunds topic takes this very path (deduct.RefundBatch).
	r, err := op.Deductor.Refund(ctx, event.RefundCommand{RefundID: *id, EventID: *eventID, MerchantID: *merchant, Amount: *amount,
		Reason: *reason, OccurredAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	res := refundResult{RefundID: *id, EventID: *eventID, MerchantID: *merchant, Amount: *amount, Outcome: string(r.Outcome), Refunded: r.Refunded}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "refund %s of %s: %s (%d back to %s)\n", res.RefundID, res.EventID, res.Outcome, res.Refunded, res.MerchantID)
	return err
}

func (c *ctl) runRefunds(ctx context.Context, args []string) error {
	fs := c.flags("payment refunds", refundsUsage)
	eventID := fs.String("event", "", "the payment's event id")
	pending := fs.Bool("pending", false, "the refunds waiting for their payment")
	limit := fs.Int("limit", 100, "at most this many")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case (*eventID == "") == !*pending:
		return fs.Fail("give one of --event and --pending")
	case *eventID != "" && !event.ValidID(*eventID):
		return fs.Fail("--event %q is not 1..64 characters of [A-Za-z0-9_.:-]", *eventID)
	case *limit < 1:
		return fs.Fail("--limit %d must be at least 1", *limit)
	}
	op, closeOp, err := c.operator(ctx, false)
	if err != nil {
		return err
	}
	defer closeOp()
	recs, err := op.Ledger.Refunds(ctx, *eventID, *pending, *limit)
	if err != nil {
		return err
	}
	if *output == cli.JSON {
		if recs == nil {
			recs = []ledger.RefundRecord{}
		}
		return writeJSON(c.stdout, recs)
	}
	return writeRefunds(c.stdout, recs, time.Now())
}

func writeRefunds(w io.Writer, recs []ledger.RefundRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REFUND\tPAYMENT\tMERCHANT\tAMOUNT\tREASON\tSTATE\tBACK\tEXPIRED\tBILLED\tBEYOND\tAGE\tNOTE")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.ID, r.EventID, r.MerchantID, r.Amount, r.Reason, r.State,
			r.Returned, r.Expired, r.Billed, r.Beyond, now.Sub(r.CreatedAt).Truncate(time.Second), r.Note)
	}
	return tw.Flush()
}

func (c *ctl) runCancelRefund(ctx context.Context, args []string) error {
	fs := c.flags("payment cancel", cancelUsage)
	id := fs.String("id", "", "refund id")
	note := fs.String("note", "", "why (kept with the refund)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !event.ValidID(*id):
		return fs.Fail("--id %q is not 1..64 characters of [A-Za-z0-9_.:-]", *id)
	case *note == "" || len(*note) > 255:
		return fs.Fail("--note must be 1..255 bytes")
	}
	op, closeOp, err := c.operator(ctx, false)
	if err != nil {
		return err
	}
	defer closeOp()
	if err := op.Ledger.CancelRefund(ctx, *id, *note); err != nil {
		return err
	}
	if *output == cli.JSON {
		return writeJSON(c.stdout, map[string]string{"refund_id": *id, "outcome": "cancelled"})
	}
	_, err = fmt.Fprintf(c.stdout, "refund %s: cancelled\n", *id)
	return err
}
