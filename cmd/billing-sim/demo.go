package main

import (
	"context"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/quotaflow/billing/internal/demo"
)

// runDemo runs the whole system on this machine: see internal/demo.
func runDemo(ctx context.Context, args []string, d deps) error {
	fs := newFlagSet("demo", d.stderr)
	o := demo.Options{MySQLDSN: d.cfg.MySQL.DSN, RedisAddrs: d.cfg.Redis.Addrs, Out: d.stdout}
	brokers := fs.String("brokers", "", "use this Kafka (comma list) instead of the embedded broker; topics of the run are created there")
	fs.IntVar(&o.Partitions, "partitions", 6, "partitions of the payment topic")
	fs.IntVar(&o.Merchants, "merchants", 300, "merchants")
	fs.IntVar(&o.Events, "events", 30_000, "messages to produce")
	fs.Float64Var(&o.Hot, "hot", 0.2, "share of the traffic of the hottest merchant (0: uniform)")
	fs.Float64Var(&o.Duplicates, "duplicates", 0.02, "share of redelivered duplicates")
	fs.Float64Var(&o.Malformed, "malformed", 0.005, "share of malformed messages")
	fs.IntVar(&o.Conflicts, "conflicts", 20, "conflicting duplicates (same event_id, other amount)")
	fs.Uint64Var(&o.Seed, "seed", 1, "traffic seed")
	fs.Float64Var(&o.Rate, "rate", 0, "produce at this many events/s, stamping occurred_at at send time (0: as fast as possible)")
	fs.BoolVar(&o.NoRestart, "no-restart", false, "do not restart the second worker midway (for latency measurements)")
	fs.BoolVar(&o.Keep, "keep", false, "leave the broker and workers running until Ctrl-C")
	fs.StringVar(&o.LogLevel, "worker-log-level", "error", "log level of the demo's workers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *brokers != "" {
		o.Brokers = strings.Split(*brokers, ",")
	}
	if f, ok := d.stdout.(*os.File); ok {
		o.Terminal = term.IsTerminal(int(f.Fd()))
	}
	_, err := demo.Run(ctx, o)
	return err
}
