package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/dlq"
)

const dlqUsage = `billingctl dlq: inspect and replay the dead-letter topic (KAFKA_DLQ_TOPIC)

  billingctl dlq ls [--list] [--output text|json] [--top N] [--topic DLQ]
  billingctl dlq replay [--error-class C,..] [--merchant M,..] [--event-id E,..]
                        [--since T] [--until T] [--partition P,..] [--offset-from N] [--offset-to N]
                        [--limit N] [--dry-run] [--rate N] [--to-topic T] [--job-id ID]
                        [--max-replays N] [--progress-file F] [--restart] [--output text|json]

Times are RFC 3339 (2026-11-29T07:00:00Z) or a duration ago (90m, 2h, 7d), on the
time a record was dead-lettered. Records of one provenance (a message dead-lettered
more than once) are one message: listed once with their copies, sent once. Neither
command joins a consumer group.
`

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "billingctl dlq", dlqUsage, map[string]command{"ls": runDLQList, "replay": runDLQReplay}, args, stdout, stderr)
}

func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dlq ls", stderr)
	list := fs.Bool("list", false, "print one line per record")
	output := fs.String("output", "text", "text or json")
	top := fs.Int("top", 20, "merchants shown in the text summary (0: all)")
	topic := fs.String("topic", "", "DLQ topic (default KAFKA_DLQ_TOPIC)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || !validOutput(*output) {
		return usageError(fs, stderr, "")
	}
	c, cfg, err := dlqClient()
	if err != nil {
		return err
	}
	*topic = cmp.Or(*topic, cfg.Kafka.DLQTopic)
	if *output == "json" {
		j := newJSONList(stdout, *list)
		s, err := c.Summarize(ctx, *topic, j.add)
		if err != nil {
			return err
		}
		return j.close(s)
	}
	var each func(dlq.Entry) error
	if *list {
		fmt.Fprint(stdout, listHeader)
		each = func(e dlq.Entry) error { return writeListLine(stdout, e) }
	}
	s, err := c.Summarize(ctx, *topic, each)
	if err == nil && *list {
		fmt.Fprintln(stdout)
	}
	if err != nil {
		return err
	}
	return writeSummary(stdout, s, *top)
}

func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dlq replay", stderr)
	var o dlq.ReplayOptions
	var classes, merchants, events, since, until, partitions string
	offsetFrom, offsetTo := int64(-1), int64(-1)
	fs.StringVar(&classes, "error-class", "", "only these error classes, comma-separated (invalid, conflict, refused, exhausted)")
	fs.StringVar(&merchants, "merchant", "", "only these merchants, comma-separated")
	fs.StringVar(&events, "event-id", "", "only these event ids, comma-separated")
	fs.StringVar(&since, "since", "", "only records dead-lettered at or after T (RFC 3339 or a duration ago)")
	fs.StringVar(&until, "until", "", "only records dead-lettered before T (RFC 3339 or a duration ago)")
	fs.StringVar(&partitions, "partition", "", "only these DLQ partitions, comma-separated")
	fs.Int64Var(&offsetFrom, "offset-from", -1, "lowest DLQ offset, inclusive")
	fs.Int64Var(&offsetTo, "offset-to", -1, "highest DLQ offset, inclusive")
	fs.IntVar(&o.Limit, "limit", 0, "send at most N records in this run (0: all)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print exactly what would be sent; send and record nothing")
	fs.Float64Var(&o.Rate, "rate", 0, "at most N messages per second (0: unlimited)")
	fs.StringVar(&o.ToTopic, "to-topic", "", "send here instead of each record's original topic")
	fs.StringVar(&o.JobID, "job-id", "", "replay.job_id header (default: the resumed job's, or generated)")
	fs.IntVar(&o.MaxReplays, "max-replays", dlq.DefaultMaxReplays, "refuse records already replayed this many times")
	fs.StringVar(&o.ProgressFile, "progress-file", "", "progress file (default ./dlq-replay-<dlq-topic>.jsonl)")
	fs.BoolVar(&o.Restart, "restart", false, "begin a new job for this selection: send again what its stored job sent")
	fs.IntVar(&o.BatchSize, "batch-size", 100, "messages per acknowledged write")
	output := fs.String("output", "text", "text or json")
	topic := fs.String("topic", "", "DLQ topic (default KAFKA_DLQ_TOPIC)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || !validOutput(*output) {
		return usageError(fs, stderr, "")
	}
	var err error
	if o.Filter, err = parseFilter(classes, merchants, events, since, until, partitions, offsetFrom, offsetTo, time.Now()); err != nil {
		return usageError(fs, stderr, err.Error())
	}
	c, cfg, err := dlqClient()
	if err != nil {
		return err
	}
	o.DLQTopic = cmp.Or(*topic, cfg.Kafka.DLQTopic)
	o.ProgressFile = cmp.Or(o.ProgressFile, "dlq-replay-"+o.DLQTopic+".jsonl")
	if err := o.Validate(); err != nil {
		return usageError(fs, stderr, err.Error())
	}

	plan := &planPrinter{w: stdout, json: *output == "json"}
	var obs dlq.Observer = plan
	var bar *progressObserver
	if !o.DryRun {
		bar = &progressObserver{w: stderr, terminal: isTerminal(stderr), interval: time.Second}
		obs = bar
	}
	rep, err := c.Replay(ctx, o, obs)
	if bar != nil {
		bar.finish()
	}
	if perr := cmp.Or(writeReport(stdout, *output, rep, plan.planned), plan.err); perr != nil && err == nil {
		err = perr
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("replay interrupted after %d acknowledged message(s); run the same command to resume: %w", rep.Sent, err)
	}
	return err
}

func parseFilter(classes, merchants, events, since, until, partitions string, offsetFrom, offsetTo int64, now time.Time) (dlq.Filter, error) {
	var f dlq.Filter
	var errs []error
	var err error
	for _, c := range splitList(classes) {
		if !slices.Contains([]dlq.Class{dlq.ClassInvalid, dlq.ClassConflict, dlq.ClassRefused, dlq.ClassExhausted}, dlq.Class(c)) {
			errs = append(errs, fmt.Errorf("--error-class %q is not one of invalid, conflict, refused, exhausted", c))
		}
		f.Classes = append(f.Classes, dlq.Class(c))
	}
	f.Merchants, f.EventIDs = splitList(merchants), splitList(events)
	if f.Since, err = parseTimeBound(since, now); err != nil {
		errs = append(errs, fmt.Errorf("--since: %w", err))
	}
	if f.Until, err = parseTimeBound(until, now); err != nil {
		errs = append(errs, fmt.Errorf("--until: %w", err))
	}
	for _, p := range splitList(partitions) {
		n, err := strconv.Atoi(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("--partition %q is not a number", p))
		}
		f.Partitions = append(f.Partitions, n)
	}
	f.OffsetFrom = max(offsetFrom, 0)
	if offsetTo >= 0 {
		f.OffsetEnd = offsetTo + 1
	}
	return f, errors.Join(errs...)
}

// errBadTime means a time bound is neither RFC 3339 nor a duration.
var errBadTime = errors.New("not an RFC 3339 time or a duration")

// parseTimeBound reads an RFC 3339 time ("2026-11-29T07:00:00Z") or a
// duration ago ("90m", "2h", "7d"). An empty spec is the zero bound. A
// relative bound keeps its text, so it names the same selection every run.
func parseTimeBound(spec string, now time.Time) (dlq.TimeBound, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return dlq.TimeBound{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, spec); err == nil {
		return dlq.TimeBound{Spec: t.UTC().Format(time.RFC3339Nano), At: t.UTC()}, nil
	}
	d, err := time.ParseDuration(spec)
	if days, ok := strings.CutSuffix(spec, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d < 0 {
		return dlq.TimeBound{}, fmt.Errorf("%w: %q", errBadTime, spec)
	}
	return dlq.TimeBound{Spec: spec, At: now.Add(-d).UTC()}, nil
}

func writeReport(w io.Writer, output string, rep dlq.Report, planned []plannedView) error {
	if output == "json" {
		doc := struct {
			Report  dlq.Report    `json:"report"`
			Planned []plannedView `json:"planned,omitempty"`
		}{rep, planned}
		if rep.DryRun && doc.Planned == nil {
			doc.Planned = []plannedView{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	var b strings.Builder
	verb := "sent"
	if rep.DryRun {
		verb = "dry run: would send"
	}
	fmt.Fprintf(&b, "%s %d message(s) as job %s; selection %s\n", verb, rep.Sent, rep.JobID, rep.Selection)
	fmt.Fprintf(&b, "examined %d DLQ record(s), %d selected, %d refused", rep.Examined, rep.Matched, len(rep.Refused))
	if rep.Copies > 0 {
		fmt.Fprintf(&b, ", %d copies skipped (a message dead-lettered more than once is sent once)", rep.Copies)
	}
	switch {
	case rep.LimitReached:
		b.WriteString("; stopped at --limit, run again for more")
	case rep.Done:
		b.WriteString("; selection complete up to the high watermark")
	}
	if rep.Resumed {
		b.WriteString("; resumed from " + rep.ProgressFile)
	}
	b.WriteString("\n")
	for _, r := range rep.Refused {
		fmt.Fprintf(&b, "refused %d/%d event_id=%s merchant=%s: %s\n", r.Partition, r.Offset, cmp.Or(r.EventID, "-"), r.Merchant, r.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dlqClient loads the Kafka part of the environment and connects.
func dlqClient() (*dlq.Client, config.Config, error) {
	cfg, err := config.Load(os.Getenv, config.NeedKafka)
	if err != nil {
		return nil, cfg, err
	}
	k, err := dial.KafkaClients(cfg.Kafka, "billingctl")
	if err != nil {
		return nil, cfg, err
	}
	c, err := dlq.NewClient(dlq.Broker{Addrs: cfg.Kafka.Brokers, Dialer: k.Dialer, Transport: k.Transport})
	return c, cfg, err
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func usageError(fs *flag.FlagSet, stderr io.Writer, msg string) error {
	if msg != "" {
		fmt.Fprintf(stderr, "billingctl %s: %s\n\n", fs.Name(), msg)
	}
	fmt.Fprint(stderr, dlqUsage)
	return errUsage
}

func validOutput(s string) bool { return s == "text" || s == "json" }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
