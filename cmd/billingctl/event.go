package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/event"
)

const eventUsage = `billingctl event show: what happened to one event

  billingctl event show ID [--output text|json]

Its ledger row (outcome, balance after), every record of it in the dead-letter
topic (copies, replays that failed again, provenance, replay history, whether
resolved) and the balance events it caused, from MySQL and the DLQ topic (read
to its high watermarks, as 'dlq ls' does). The JSON is GET /v1/events/{id}'s.
Exit codes: 0 found, 1 failed, 2 bad command line or environment, 3 nothing
is known of the event.
`

// errUnknownEvent: no ledger row, dead-letter record or balance event names it.
var errUnknownEvent = errors.New("nothing is known of this event: no ledger row, no dead-letter record, no balance event")

func (c *ctl) runEvent(ctx context.Context, args []string) error {
	return cli.Dispatch(ctx, "billingctl event", eventUsage, []cli.Command{{Name: "show", Run: c.runEventShow}}, args, c.stdout, c.stderr)
}

func (c *ctl) runEventShow(ctx context.Context, args []string) error {
	fs := c.flags("event show", eventUsage)
	output := fs.Output()
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // the id comes first, the flags after it
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !event.ValidID(id) {
		return fs.Fail("want an event id first, 1..64 characters of [A-Za-z0-9_.:-]")
	}
	dc, cfg, err := c.dlqClient()
	if err != nil {
		return err
	}
	gdb, err := dial.MySQL(ctx, cfg.MySQL, zap.NewNop())
	if err != nil {
		return err
	}
	db, err := gdb.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := adminapi.NewEvents(db, dc, cfg.Kafka.DLQTopic).Show(ctx, id)
	if err != nil {
		return err
	}
	if *output == cli.JSON {
		err = writeJSON(c.stdout, v)
	} else {
		_, err = fmt.Fprint(c.stdout, eventText(v))
	}
	if err == nil && !v.Known() {
		err = errUnknownEvent
	}
	return err
}

func eventText(v adminapi.EventView) string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	fmt.Fprintf(&b, "event %s\n", v.EventID)
	if len(v.Ledger) == 0 {
		b.WriteString("ledger: no row\n")
	}
	for _, r := range v.Ledger {
		fmt.Fprintf(&b, "ledger: %s %d of merchant %s", r.Kind, r.Amount, r.MerchantID)
		if r.Reason != "" {
			fmt.Fprintf(&b, " (%s)", r.Reason)
		}
		if r.BalanceAfter != nil {
			fmt.Fprintf(&b, ", balance after %d", *r.BalanceAfter)
		}
		if r.Seq != nil {
			fmt.Fprintf(&b, ", seq %d", *r.Seq)
		}
		fmt.Fprintf(&b, "; payment %s, occurred %s, recorded %s\n", orDash(r.PaymentID), ts(r.OccurredAt), ts(r.CreatedAt))
		if r.GrantID != nil {
			fmt.Fprintf(&b, "  paid by grant %s\n", *r.GrantID)
		}
		for _, p := range r.Attribution {
			fmt.Fprintf(&b, "  grant %s paid %d\n", p.GrantID, p.Amount)
		}
	}
	fmt.Fprintf(&b, "dead letters: %d record(s)\n", len(v.DeadLetters))
	for _, d := range v.DeadLetters {
		fmt.Fprintf(&b, "  %d/%d %s %s from %s/%d/%d (origin %s), replay %d", d.Partition, d.Offset, ts(d.Time), d.Class,
			d.OriginalTopic, d.OriginalPartition, d.OriginalOffset, d.Root(), d.ReplayCount)
		if d.ReplayJob != "" {
			fmt.Fprintf(&b, " by %s", d.ReplayJob)
		}
		if d.Resolved {
			b.WriteString(", resolved")
		}
		fmt.Fprintf(&b, ": %s\n", oneLine(d.Message))
	}
	fmt.Fprintf(&b, "balance events: %d\n", len(v.BalanceEvents))
	for _, e := range v.BalanceEvents {
		fmt.Fprintf(&b, "  %s %s -> %s, %s\n", e.Type, optInt(e.BalanceBefore), optInt(e.BalanceAfter),
			cmp.Or(sentText(e.SentAt), "not sent yet"))
	}
	fmt.Fprintf(&b, "refunds: %d\n", len(v.Refunds))
	for _, r := range v.Refunds {
		fmt.Fprintf(&b, "  %s %s of %d: %s, %d back, %d expired, %d billed, %d beyond\n", r.ID, r.Reason, r.Amount, r.State,
			r.Returned, r.Expired, r.Billed, r.Beyond)
	}
	return b.String()
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func sentText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return "sent " + t.UTC().Format(time.RFC3339Nano)
}
