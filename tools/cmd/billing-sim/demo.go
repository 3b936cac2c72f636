package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/tools/internal/demo"
)

const demoUsage = `billing-sim demo: the whole system on this machine (local MariaDB and Redis, an embedded Kafka broker)

  billing-sim demo [--events N] [--merchants N] [--rate N] [--keep] [--brokers host:port] [--output text|json] ...

The story and the summary go to stdout (to stderr with --output json, where
stdout gets the result as one JSON object). --keep leaves the broker and the
workers running until Ctrl-C, serves the read API (with a bearer token it
prints) and creates the grants topic, and prints how to reach them and how to
send a grant command; --trace prints the span tree of one lane batch (from an
in-memory exporter). Exit codes: 0 every check held, 1 failed or a check did
not hold, 2 bad command line or environment.
`

// demoResult is what demo prints with --output json.
type demoResult struct {
	OK           bool              `json:"ok"`
	Error        string            `json:"error,omitempty"`
	Database     string            `json:"database"`
	Messages     int               `json:"messages"`
	ConsumeMs    int64             `json:"consume_ms"`
	EventsPerSec float64           `json:"events_per_second"`
	Outcomes     map[string]int64  `json:"outcomes"`
	DeadLetters  map[string]int    `json:"dead_letters"`
	LatencyP50Ms float64           `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms float64           `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs float64           `json:"latency_max_ms,omitempty"`
	Reconcile    *reconcile.Report `json:"reconcile,omitempty"`
	Recheck      *reconcile.Report `json:"recheck,omitempty"`
	Violations   []string          `json:"violations"`
}

func newDemoResult(s *demo.Summary, err error) demoResult {
	r := demoResult{OK: err == nil, Database: s.Database, Messages: len(s.Traffic.Messages), ConsumeMs: s.ConsumeTime.Milliseconds(),
		EventsPerSec: s.Throughput(), Outcomes: s.Outcomes, DeadLetters: map[string]int{}, LatencyP50Ms: s.LatencyP50,
		LatencyP99Ms: s.LatencyP99, LatencyMaxMs: s.LatencyMax, Reconcile: s.Reconcile, Recheck: s.Recheck, Violations: []string{}}
	if err != nil {
		r.Error = err.Error()
	}
	for c, n := range s.DLQ {
		r.DeadLetters[string(c)] = n
	}
	if s.Invariants != nil {
		r.Violations = append(r.Violations, s.Invariants.Violations...)
	}
	return r
}

// runDemo runs the whole system on this machine: see internal/demo.
func runDemo(ctx context.Context, args []string, d deps) error {
	o, output, err := parseDemoFlags(args, d)
	if err != nil {
		return err
	}
	if f, ok := o.Out.(*os.File); ok {
		o.Terminal = term.IsTerminal(int(f.Fd()))
	}
	sum, err := demo.Run(ctx, o)
	if output == cli.JSON && sum != nil {
		err = errors.Join(err, printJSON(d.stdout, newDemoResult(sum, err)))
	}
	return err
}

// parseDemoFlags reads demo's command line into its options and --output.
func parseDemoFlags(args []string, d deps) (demo.Options, string, error) {
	fs := d.flags("demo", demoUsage)
	o := demo.Options{MySQLDSN: d.cfg.MySQL.DSN, RedisAddrs: d.cfg.Redis.Addrs, Out: d.stdout}
	brokers := fs.String("brokers", "", "use this Kafka (comma list) instead of the embedded broker; topics of the run are created there")
	fs.IntVar(&o.Partitions, "partitions", 6, "partitions of the payment topic")
	fs.IntVar(&o.Merchants, "merchants", 300, "merchants")
	fs.IntVar(&o.Events, "events", 30_000, "messages to produce")
	fs.Float64Var(&o.Hot, "hot", 0.2, "share of the traffic of the hottest merchant (0: uniform)")
	fs.IntVar(&o.Shards, "shards", 1, "quota shards of the hottest merchant, 1..64")
	fs.Float64Var(&o.Duplicates, "duplicates", 0.02, "share of redelivered duplicates")
	fs.Float64Var(&o.Malformed, "malformed", 0.005, "share of malformed messages")
	fs.IntVar(&o.Conflicts, "conflicts", 20, "conflicting duplicates (same event_id, other amount)")
	fs.Float64Var(&o.Refunds, "refunds", 0.05, "share of refunds of the traffic's payments (some sent ahead of their payment, the rest after it)")
	fs.Uint64Var(&o.Seed, "seed", 1, "traffic seed")
	fs.Float64Var(&o.Rate, "rate", 0, "produce at this many events/s, stamping occurred_at at send time (0: as fast as possible)")
	fs.BoolVar(&o.NoRestart, "no-restart", false, "do not restart the second worker midway (for latency measurements)")
	fs.BoolVar(&o.Keep, "keep", false, "leave the broker and workers running until Ctrl-C, with the read API and the grants topic")
	fs.BoolVar(&o.Trace, "trace", false, "record the workers' spans in memory and print one lane batch's span tree")
	fs.StringVar(&o.LogLevel, "worker-log-level", "error", "log level of the demo's workers")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if *output == cli.JSON {
		o.Out = d.stderr // stdout holds the one JSON document
	}
	if *brokers != "" {
		o.Brokers = strings.Split(*brokers, ",")
	}
	return o, *output, nil
}
