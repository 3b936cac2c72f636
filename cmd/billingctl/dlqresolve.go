package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/dlq"
)

const resolveUsage = `billingctl dlq resolve: mark dead-lettered messages resolved

  billingctl dlq resolve [filters] [--note TEXT] [--dry-run] [--output text|json] [--topic DLQ]

Marks every unresolved message the filters select (at least one filter is
required), so 'dlq ls' and 'dlq replay' leave it out. The mark is a message
of the DLQ topic, keyed like the records it resolves: every operator sees it,
and compaction keeps it while it drops the records. Exit codes: 0 marked,
1 failed, 2 bad command line or environment.
`

func (c *ctl) runDLQResolve(ctx context.Context, args []string) error {
	fs := c.flags("dlq resolve", resolveUsage)
	var ff filterFlags
	ff.register(fs)
	note := fs.String("note", "", "why, kept in the mark (default \"resolved\")")
	dryRun := fs.Bool("dry-run", false, "print what would be marked; mark nothing")
	topic := fs.String("topic", "", "DLQ topic (default KAFKA_DLQ_TOPIC)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fs.Fail("%v", err)
	}
	if f.String() == "all" {
		return fs.Fail("name what to resolve with a filter (--event-id, --merchant, ...)")
	}
	dc, cfg, err := c.dlqClient()
	if err != nil {
		return err
	}
	entries, err := dc.Resolve(ctx, cmp.Or(*topic, cfg.Kafka.DLQTopic), f, *note, *dryRun)
	if err != nil {
		return err
	}
	if *output == cli.JSON {
		return writeJSON(c.stdout, struct {
			DryRun   bool        `json:"dry_run"`
			Resolved []dlq.Entry `json:"resolved"`
		}{*dryRun, append([]dlq.Entry{}, entries...)})
	}
	var b strings.Builder
	verb := "resolved"
	if *dryRun {
		verb = "dry run: would resolve"
	}
	fmt.Fprintf(&b, "%s %d message(s); selection %s\n", verb, len(entries), f)
	for _, e := range entries {
		fmt.Fprintf(&b, "%s event_id=%s merchant=%s class=%s copies=%d\n", e.Provenance(), orDash(e.EventID), e.Merchant, e.Class, e.Copies)
	}
	_, err = fmt.Fprint(c.stdout, b.String())
	return err
}
