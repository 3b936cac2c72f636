package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/workload"
)

type produceFlags struct {
	cfg      workload.Config
	brokers  string
	topic    string
	refundsT string
	skew     skewFlags
	rate     rateFlag
	total    int
	progress time.Duration
	output   string
}

const produceUsage = `billing-sim produce: write synthetic payment.succeeded events to Kafka

  billing-sim produce [--total N | --rate N/s] [--merchants N] [--hot SHARE | --skew zipf:S] [--duplicates F] [--malformed F] [--refunds F] [--output text|json] ...

Progress lines go to stdout (stderr with --output json); the result is the last
line, or one JSON object. Exit codes: 0 done (also an unbounded run
interrupted), 1 failed, 2 bad command line or environment.
`

// produceResult is what produce prints with --output json.
type produceResult struct {
	Topic      string  `json:"topic"`
	Messages   int     `json:"messages"`
	Valid      int     `json:"valid"`
	Duplicates int     `json:"duplicates"`
	Malformed  int     `json:"malformed"`
	Refunds    int     `json:"refunds,omitempty"`
	ElapsedMs  int64   `json:"elapsed_ms"`
	PerSecond  float64 `json:"per_second"`
}

func parseProduceFlags(args []string, d deps) (produceFlags, error) {
	var f produceFlags
	c := &f.cfg
	fs := d.flags("produce", produceUsage)
	fs.StringVar(&f.brokers, "brokers", strings.Join(d.cfg.Kafka.Brokers, ","), "Kafka brokers, comma-separated (KAFKA_BROKERS)")
	fs.StringVar(&f.topic, "topic", d.cfg.Kafka.Topic, "topic to write (KAFKA_TOPIC)")
	fs.IntVar(&c.Merchants, "merchants", workload.DefaultMerchants, "number of merchants (m-000000 ...)")
	f.skew.register(fs, 0)
	fs.Var(&f.rate, "rate", "messages per second, as N or N/s; 0 = as fast as possible")
	fs.IntVar(&f.total, "total", 10_000, "messages to write; 0 = until interrupted")
	fs.Float64Var(&c.Duplicates, "duplicates", 0, "share of messages re-emitting an earlier event (same event_id)")
	fs.Float64Var(&c.Malformed, "malformed", 0, "share of messages breaking the contract (bad JSON, amount, source...)")
	fs.Float64Var(&c.Refunds, "refunds", 0, "share of messages that are refunds of earlier payments (partial, whole, over-refunded, ahead of their payment, sent again)")
	fs.StringVar(&f.refundsT, "refunds-topic", d.cfg.Kafka.RefundsTopic, "topic of the refunds (KAFKA_REFUNDS_TOPIC)")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed: the same seed gives the same merchants, amounts, sources, duplicates and flaws (event ids follow --id-prefix, times the start)")
	fs.Int64Var(&c.MinAmount, "min-amount", workload.DefaultMinAmount, "smallest amount")
	fs.Int64Var(&c.MaxAmount, "max-amount", workload.DefaultMaxAmount, "largest amount")
	fs.StringVar(&c.IDPrefix, "id-prefix", "", `event_id prefix (default "evt-<time>-", so runs never share an event_id)`)
	fs.DurationVar(&f.progress, "progress", time.Second, "interval of progress lines")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.output = *output
	c.IDPrefix = cmp.Or(c.IDPrefix, "evt-"+strconv.FormatInt(time.Now().Unix(), 36)+"-")
	if f.brokers == "" {
		return f, fs.Fail("no brokers: set --brokers or KAFKA_BROKERS")
	}
	return f, nil
}

func runProduce(ctx context.Context, args []string, d deps) error {
	f, err := parseProduceFlags(args, d)
	if err != nil {
		return err
	}
	cfg := f.cfg
	if cfg.Skew, err = f.skew.value(); err != nil {
		return err
	}
	cfg.Start = time.Now().UTC()
	if f.rate > 0 { // paced: an event's occurred_at is when it is due
		cfg.Step = time.Duration(float64(time.Second) / float64(f.rate))
	}
	gen, err := workload.New(cfg)
	if err != nil {
		return err
	}
	kcfg := d.cfg.Kafka
	kcfg.Brokers = strings.Split(f.brokers, ",")
	clients, err := dial.KafkaClients(kcfg, "billing-sim")
	if err != nil {
		return err
	}
	w := workload.Writers{Payments: workload.NewKafkaWriter(kcfg.Brokers, f.topic, clients.Transport)}
	if cfg.Refunds > 0 {
		w.Refunds = workload.NewKafkaWriter(kcfg.Brokers, f.refundsT, clients.Transport)
	}
	d.log.Info("producing", zap.String("topic", f.topic), zap.Strings("brokers", kcfg.Brokers),
		zap.Int("total", f.total), zap.Float64("rate", float64(f.rate)), zap.String("skew", cfg.Skew.String()),
		zap.Uint64("seed", cfg.Seed), zap.String("id_prefix", cfg.IDPrefix))
	reported, progress := time.Now(), d.stdout
	if f.output == cli.JSON {
		progress = d.stderr // stdout holds the one JSON document
	}
	st, err := workload.ProduceOnSchedule(ctx, w, gen, f.total, f.rate == 0, func(st workload.ScheduleStats) {
		if time.Since(reported) >= f.progress {
			reported = time.Now()
			fmt.Fprintln(progress, "produced", describe(st))
		}
	})
	err = errors.Join(err, closeWriters(w))
	clients.Transport.CloseIdleConnections()
	if f.output == cli.JSON {
		s := st.Summary
		err = errors.Join(err, printJSON(d.stdout, produceResult{Topic: f.topic, Messages: s.Messages, Valid: s.Valid, Duplicates: s.Duplicates,
			Malformed: s.Malformed, Refunds: s.Refunds + s.RefundDuplicates, ElapsedMs: st.Elapsed.Milliseconds(), PerSecond: float64(s.Messages) / max(st.Elapsed.Seconds(), 1e-9)}))
	} else {
		fmt.Fprintf(d.stdout, "done: %s to %s\n", describe(st), f.topic)
	}
	if errors.Is(err, context.Canceled) && f.total == 0 {
		return nil // interrupted an unbounded run: that is how it ends
	}
	return err
}

func describe(st workload.ScheduleStats) string {
	s := st.Summary
	refunds := ""
	if n := s.Refunds + s.RefundDuplicates; n > 0 {
		refunds = fmt.Sprintf(", %d refunds", n)
	}
	return fmt.Sprintf("%d messages (%d valid, %d duplicates, %d malformed%s) in %s: %.0f msg/s",
		s.Messages, s.Valid, s.Duplicates, s.Malformed, refunds, st.Elapsed.Round(time.Millisecond), float64(s.Messages)/max(st.Elapsed.Seconds(), 1e-9))
}

// closeWriters flushes and closes the writers there are.
func closeWriters(w workload.Writers) error {
	var errs []error
	for _, x := range []workload.MessageWriter{w.Payments, w.Refunds} {
		if c, ok := x.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
