package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/dlq"
)

const dlqUsage = `billingctl dlq: inspect and replay the dead-letter topic (KAFKA_DLQ_TOPIC)

  billingctl dlq ls [filters] [--list] [--output text|json] [--top N] [--topic DLQ]
  billingctl dlq replay [filters] [--limit N] [--dry-run] [--rate N] [--to-topic T] [--job-id ID]
                        [--max-replays N] [--progress-file F] [--restart] [--output text|json]
  billingctl dlq resolve [filters] [--note TEXT] [--dry-run] [--output text|json]

Filters, the same for all three: --error-class C,.. --merchant M,.. --event-id E,..
--since T --until T --partition P,.. --offset-from N --offset-to N --replay-count N,..
Times are RFC 3339 (2026-11-29T07:00:00Z) or a duration ago (90m, 2h, 7d), on the
time a record was dead-lettered. Records of one provenance (a message dead-lettered
more than once, or replayed and dead-lettered again) are one message: listed once
with their copies, sent once per job. Resolved messages leave ls and replay. No
command joins a consumer group. Run 'billingctl dlq COMMAND --help' for its flags.
`

const lsUsage = `billingctl dlq ls: summarize (and with --list, list) the dead-letter topic

  billingctl dlq ls [filters] [--list] [--output text|json] [--top N] [--topic DLQ]

The filters select exactly what 'dlq replay' with the same filters would consider.
Exit codes: 0 listed, 1 failed, 2 bad command line or environment.
`

const replayUsage = `billingctl dlq replay: send dead-lettered messages back to their topic

  billingctl dlq replay [filters] [--limit N] [--dry-run] [--rate N] [--to-topic T] [--job-id ID]
                        [--max-replays N] [--progress-file F] [--restart] [--output text|json]

What each selection's job sent is appended to a progress file after every
acknowledged batch (default DLQ_STATE_DIR/dlq-replay-<dlq-topic>.jsonl), so a
second run sends nothing twice (a replayed message that failed again is a copy of
its original, not sent again), an interrupted run resumes, and --restart begins a
new job, which sends again, counting from the latest copy's replay count. Exit codes: 0 done (refused records are reported, not failures),
1 failed (what failed and what was sent before are printed), 2 bad command line
or environment.
`

func (c *ctl) runDLQ(ctx context.Context, args []string) error {
	return cli.Dispatch(ctx, "billingctl dlq", dlqUsage, []cli.Command{
		{Name: "ls", Run: c.runDLQList}, {Name: "replay", Run: c.runDLQReplay}, {Name: "resolve", Run: c.runDLQResolve},
	}, args, c.stdout, c.stderr)
}

// filterFlags are the record filters: one registration for ls and replay,
// so the two commands always take the same ones.
type filterFlags struct {
	classes, merchants, events, since, until, partitions, replayCounts string
	offsetFrom, offsetTo                                               int64
}

func (f *filterFlags) register(fs *cli.FlagSet) {
	fs.StringVar(&f.classes, "error-class", "", "only these error classes, comma-separated (invalid, conflict, refused, exhausted)")
	fs.StringVar(&f.merchants, "merchant", "", "only these merchants, comma-separated")
	fs.StringVar(&f.events, "event-id", "", "only these event ids, comma-separated")
	fs.StringVar(&f.since, "since", "", "only records dead-lettered at or after T (RFC 3339 or a duration ago)")
	fs.StringVar(&f.until, "until", "", "only records dead-lettered before T (RFC 3339 or a duration ago)")
	fs.StringVar(&f.partitions, "partition", "", "only these DLQ partitions, comma-separated")
	fs.Int64Var(&f.offsetFrom, "offset-from", -1, "lowest DLQ offset, inclusive")
	fs.Int64Var(&f.offsetTo, "offset-to", -1, "highest DLQ offset, inclusive")
	fs.StringVar(&f.replayCounts, "replay-count", "", "only records replayed this many times before, comma-separated (0: never)")
}

// filter parses the flags into a validated filter.
func (f *filterFlags) filter(now time.Time) (dlq.Filter, error) {
	flt, err := parseFilter(f.classes, f.merchants, f.events, f.since, f.until, f.partitions, f.replayCounts, f.offsetFrom, f.offsetTo, now)
	if err != nil {
		return flt, err
	}
	return flt, flt.Validate()
}

func (c *ctl) runDLQList(ctx context.Context, args []string) error {
	fs := c.flags("dlq ls", lsUsage)
	var ff filterFlags
	ff.register(fs)
	list := fs.Bool("list", false, "print one line per record")
	top := fs.Int("top", 20, "merchants shown in the text summary (0: all)")
	topic := fs.String("topic", "", "DLQ topic (default KAFKA_DLQ_TOPIC)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fs.Fail("%v", err)
	}
	dc, cfg, err := c.dlqClient()
	if err != nil {
		return err
	}
	*topic = cmp.Or(*topic, cfg.Kafka.DLQTopic)
	if *output == cli.JSON {
		j := newJSONList(c.stdout, *list)
		s, err := dc.Summarize(ctx, *topic, f, j.add)
		if err != nil {
			return err
		}
		return j.close(s)
	}
	var each func(dlq.Entry) error
	if *list {
		fmt.Fprint(c.stdout, listHeader)
		each = func(e dlq.Entry) error { return writeListLine(c.stdout, e) }
	}
	s, err := dc.Summarize(ctx, *topic, f, each)
	if err == nil && *list {
		fmt.Fprintln(c.stdout)
	}
	if err != nil {
		return err
	}
	return writeSummary(c.stdout, s, *top)
}

func (c *ctl) runDLQReplay(ctx context.Context, args []string) error {
	fs := c.flags("dlq replay", replayUsage)
	var o dlq.ReplayOptions
	var ff filterFlags
	ff.register(fs)
	fs.IntVar(&o.Limit, "limit", 0, "send at most N records in this run (0: all)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print exactly what would be sent; send and record nothing")
	fs.Float64Var(&o.Rate, "rate", 0, "at most N messages per second (0: unlimited)")
	fs.StringVar(&o.ToTopic, "to-topic", "", "send here instead of each record's original topic")
	fs.StringVar(&o.JobID, "job-id", "", "replay.job_id header (default: the resumed job's, or generated)")
	fs.IntVar(&o.MaxReplays, "max-replays", dlq.DefaultMaxReplays, "refuse records already replayed this many times")
	fs.StringVar(&o.ProgressFile, "progress-file", "", "progress file (default DLQ_STATE_DIR/dlq-replay-<dlq-topic>.jsonl)")
	fs.BoolVar(&o.Restart, "restart", false, "begin a new job for this selection: send again what its stored job sent")
	fs.IntVar(&o.BatchSize, "batch-size", 100, "messages per acknowledged write")
	topic := fs.String("topic", "", "DLQ topic (default KAFKA_DLQ_TOPIC)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.Filter, err = ff.filter(time.Now()); err != nil {
		return fs.Fail("%v", err)
	}
	dc, cfg, err := c.dlqClient()
	if err != nil {
		return err
	}
	o.DLQTopic = cmp.Or(*topic, cfg.Kafka.DLQTopic)
	if o.ProgressFile == "" && !o.DryRun {
		dir, err := stateDir(c.getenv)
		if err != nil {
			return err
		}
		o.ProgressFile = filepath.Join(dir, "dlq-replay-"+o.DLQTopic+".jsonl")
	}
	if err := o.Validate(); err != nil {
		return fs.Fail("%v", err)
	}

	plan := &planPrinter{w: c.stdout, json: *output == cli.JSON}
	var obs dlq.Observer = plan
	var bar *progressObserver
	if !o.DryRun {
		bar = &progressObserver{w: c.stderr, terminal: isTerminal(c.stderr), interval: time.Second}
		obs = bar
	}
	rep, err := dc.Replay(ctx, o, obs)
	if bar != nil {
		bar.finish()
	}
	if errors.Is(err, context.Canceled) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	if err != nil {
		err = fmt.Errorf("replay failed: %w", err)
	}
	if perr := cmp.Or(writeReport(c.stdout, *output, rep, plan.planned, err), plan.err); perr != nil && err == nil {
		err = perr
	}
	return err
}

// stateDir is where replay progress is kept: DLQ_STATE_DIR, else the user's
// state directory ($XDG_STATE_HOME or ~/.local/state) under billing. It is
// created if missing. The working directory is never used: a container's is
// gone with the container, or read-only.
func stateDir(getenv func(string) string) (string, error) {
	dir := getenv("DLQ_STATE_DIR")
	if dir == "" {
		base := getenv("XDG_STATE_HOME")
		if home := getenv("HOME"); base == "" && home != "" {
			base = filepath.Join(home, ".local", "state")
		}
		if base == "" {
			return "", errors.New("no directory for replay progress: set DLQ_STATE_DIR (or pass --progress-file)")
		}
		dir = filepath.Join(base, "billing")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("DLQ_STATE_DIR: %w", err)
	}
	return dir, nil
}

func parseFilter(classes, merchants, events, since, until, partitions, replayCounts string, offsetFrom, offsetTo int64, now time.Time) (dlq.Filter, error) {
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
	for _, c := range splitList(replayCounts) {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("--replay-count %q is not a number of replays", c))
		}
		f.ReplayCounts = append(f.ReplayCounts, n)
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

// writeReport writes the replay's report; failed is the run's error, if any,
// told with what was done before it.
func writeReport(w io.Writer, output string, rep dlq.Report, planned []plannedView, failed error) error {
	if output == cli.JSON {
		doc := struct {
			Report  dlq.Report    `json:"report"`
			Planned []plannedView `json:"planned,omitempty"`
			Error   string        `json:"error,omitempty"`
		}{Report: rep, Planned: planned}
		if rep.DryRun && doc.Planned == nil {
			doc.Planned = []plannedView{}
		}
		if failed != nil {
			doc.Error = failed.Error()
		}
		return writeJSON(w, doc)
	}
	var b strings.Builder
	if failed != nil && rep.JobID == "" { // failed before a job began: nothing was sent
		fmt.Fprintf(&b, "%v; nothing was sent (selection %s)\n", failed, rep.Selection)
		_, err := io.WriteString(w, b.String())
		return err
	}
	verb := "sent"
	if rep.DryRun {
		verb = "dry run: would send"
	}
	fmt.Fprintf(&b, "%s %d message(s) as job %s; selection %s\n", verb, rep.Sent, rep.JobID, rep.Selection)
	fmt.Fprintf(&b, "examined %d DLQ record(s), %d selected, %d refused", rep.Examined, rep.Matched, len(rep.Refused))
	if rep.Copies > 0 {
		fmt.Fprintf(&b, ", %d copies skipped (a message dead-lettered more than once is sent once)", rep.Copies)
	}
	if rep.Resolved > 0 {
		fmt.Fprintf(&b, ", %d resolved skipped", rep.Resolved)
	}
	switch {
	case failed != nil:
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
	if failed != nil {
		fmt.Fprintf(&b, "%v\nthe %d message(s) above were acknowledged and recorded in %s: run the same command to resume\n",
			failed, rep.Sent, rep.ProgressFile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dlqClient loads the Kafka part of the environment and connects.
func (c *ctl) dlqClient() (*dlq.Client, config.Config, error) {
	cfg, err := config.Load(c.getenv, config.NeedKafka)
	if err != nil {
		return nil, cfg, err
	}
	k, err := dial.KafkaClients(cfg.Kafka, "billingctl")
	if err != nil {
		return nil, cfg, err
	}
	dc, err := dlq.NewClient(dlq.Broker{Addrs: cfg.Kafka.Brokers, Dialer: k.Dialer, Transport: k.Transport})
	return dc, cfg, err
}

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
