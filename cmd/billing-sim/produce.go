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

	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/workload"
)

type produceFlags struct {
	cfg      workload.Config
	brokers  string
	topic    string
	skew     skewFlags
	rate     rateFlag
	total    int
	progress time.Duration
}

func parseProduceFlags(args []string, d deps) (produceFlags, error) {
	var f produceFlags
	c := &f.cfg
	fs := newFlagSet("produce", d.stderr)
	fs.StringVar(&f.brokers, "brokers", strings.Join(d.cfg.Kafka.Brokers, ","), "Kafka brokers, comma-separated (KAFKA_BROKERS)")
	fs.StringVar(&f.topic, "topic", d.cfg.Kafka.Topic, "topic to write (KAFKA_TOPIC)")
	fs.IntVar(&c.Merchants, "merchants", workload.DefaultMerchants, "number of merchants (m-000000 ...)")
	f.skew.register(fs, 0)
	fs.Var(&f.rate, "rate", "messages per second, as N or N/s; 0 = as fast as possible")
	fs.IntVar(&f.total, "total", 10_000, "messages to write; 0 = until interrupted")
	fs.Float64Var(&c.Duplicates, "duplicates", 0, "share of messages re-emitting an earlier event (same event_id)")
	fs.Float64Var(&c.Malformed, "malformed", 0, "share of messages breaking the contract (bad JSON, amount, source...)")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed: the same seed gives the same merchants, amounts, sources, duplicates and flaws (event ids follow --id-prefix, times the start)")
	fs.Int64Var(&c.MinAmount, "min-amount", workload.DefaultMinAmount, "smallest amount")
	fs.Int64Var(&c.MaxAmount, "max-amount", workload.DefaultMaxAmount, "largest amount")
	fs.StringVar(&c.IDPrefix, "id-prefix", "", `event_id prefix (default "evt-<time>-", so runs never share an event_id)`)
	fs.DurationVar(&f.progress, "progress", time.Second, "interval of progress lines")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	c.IDPrefix = cmp.Or(c.IDPrefix, "evt-"+strconv.FormatInt(time.Now().Unix(), 36)+"-")
	if f.brokers == "" {
		fmt.Fprintln(d.stderr, "billing-sim produce: no brokers: set --brokers or KAFKA_BROKERS")
		return f, errUsage
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
	w := workload.NewKafkaWriter(kcfg.Brokers, f.topic, clients.Transport)
	d.log.Info("producing", zap.String("topic", f.topic), zap.Strings("brokers", kcfg.Brokers),
		zap.Int("total", f.total), zap.Float64("rate", float64(f.rate)), zap.String("skew", cfg.Skew.String()),
		zap.Uint64("seed", cfg.Seed), zap.String("id_prefix", cfg.IDPrefix))
	reported := time.Now()
	st, err := workload.ProduceOnSchedule(ctx, w, gen, f.total, f.rate == 0, func(st workload.ScheduleStats) {
		if time.Since(reported) >= f.progress {
			reported = time.Now()
			fmt.Fprintln(d.stdout, "produced", describe(st))
		}
	})
	err = errors.Join(err, w.Close())
	clients.Transport.CloseIdleConnections()
	fmt.Fprintf(d.stdout, "done: %s to %s\n", describe(st), f.topic)
	if errors.Is(err, context.Canceled) && f.total == 0 {
		return nil // interrupted an unbounded run: that is how it ends
	}
	return err
}

func describe(st workload.ScheduleStats) string {
	s := st.Summary
	return fmt.Sprintf("%d messages (%d valid, %d duplicates, %d malformed) in %s: %.0f msg/s",
		s.Messages, s.Valid, s.Duplicates, s.Malformed, st.Elapsed.Round(time.Millisecond), float64(s.Messages)/max(st.Elapsed.Seconds(), 1e-9))
}
