// Package demo runs the whole billing system on one machine, with the
// production wiring (internal/worker): an embedded Kafka-protocol broker (or a
// real one), a fresh database on the local MySQL, a Redis key prefix of its
// own, two workers in one consumer group (one restarted midway), poison and
// duplicate traffic, deliberately corrupted Redis balances, the reconciler, and
// the invariant checker at the end.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/workload"
)

// Options of a demo run.
type Options struct {
	MySQLDSN   string   // any DSN of the server; the demo creates its own database there
	RedisAddrs []string // Redis; the demo keeps to a key prefix of its own
	Brokers    []string // empty: an embedded broker
	Partitions int

	Merchants  int
	Events     int
	Hot        float64 // share of traffic of the hottest merchant
	Shards     int     // quota shards of the hottest merchant (default 1)
	Duplicates float64
	Malformed  float64
	Conflicts  int
	// Refunds is the share of the messages that are refunds (of every kind,
	// some ahead of their payment, the others after it).
	Refunds float64
	Seed    uint64
	// Rate paces production (events/s) and stamps occurred_at at send time, so
	// the end-to-end latency is measured from produce to ledger commit; 0
	// produces as fast as the broker takes it.
	Rate float64

	// NoRestart keeps the second worker running (a restart pauses the group for a
	// rebalance, which a latency measurement should not include).
	NoRestart bool
	Keep      bool   // leave broker and workers running until ctx ends
	LogLevel  string // of the workers
	Out       io.Writer
	Terminal  bool // draw progress bars

	// Trace records the workers' spans in memory and prints one lane
	// batch's span tree after consuming (tracing costs throughput).
	Trace bool
}

// Defaults fills what was left zero.
func (o *Options) Defaults() {
	o.Partitions, o.Merchants, o.Events = cmp.Or(o.Partitions, 6), cmp.Or(o.Merchants, 300), cmp.Or(o.Events, 30_000)
	o.LogLevel = cmp.Or(o.LogLevel, "error")
	o.Shards = cmp.Or(o.Shards, 1)
}

// Validate reports every bad option at once.
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, arg any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, arg))
		}
	}
	check(o.Merchants >= 10, "--merchants %d: at least 10", o.Merchants)
	check(o.Events >= 100, "--events %d: at least 100", o.Events)
	check(o.Partitions >= 1 && o.Partitions <= 64, "--partitions %d: 1..64", o.Partitions)
	check(!(o.Rate < 0), "--rate %v: not negative", o.Rate)
	check(o.Shards >= 1 && o.Shards <= shard.Max, "--shards %d: 1..64", o.Shards)
	check(o.Conflicts >= 0 && o.Conflicts <= o.Events/10, "--conflicts %d: 0..events/10", o.Conflicts)
	check(o.Refunds >= 0 && o.Refunds <= 0.5, "--refunds %v: 0..0.5", o.Refunds)
	return errors.Join(errs...)
}

func (o Options) workload() workload.Config {
	return workload.Config{
		Seed: o.Seed, Merchants: o.Merchants, Skew: workload.HotSkew(o.Hot), MinAmount: 1, MaxAmount: 10,
		Duplicates: o.Duplicates, Malformed: o.Malformed, Refunds: o.Refunds, IDPrefix: fmt.Sprintf("demo%d-", o.Seed),
		Start: time.Now().UTC(), Step: time.Microsecond,
	}
}

// Run runs the demo, prints its summary to Out and returns it; the error is non-nil when a
// step failed or a check did not hold.
func Run(ctx context.Context, o Options) (*Summary, error) {
	o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// The demo tells its own story on Out; the system's parts log at LogLevel.
	partsLog, err := logging.Build(logging.Options{Level: o.LogLevel, Sampling: true})
	if err != nil {
		return nil, err
	}
	log := partsLog.With(zap.String("demo", "part"))
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: o.RedisAddrs})
	defer rdb.Close()
	st, err := scenario.NewStage(ctx, scenario.StageOptions{Name: "demo", MySQLDSN: o.MySQLDSN, Redis: rdb,
		KeyPrefix: "demo:", Brokers: o.Brokers, Partitions: o.Partitions})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer st.Teardown() //nolint:errcheck // best effort at exit
	keys, err := keyspace.New(st.Prefix)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r := &run{o: o, st: st, keys: keys, log: log, sum: &Summary{Database: st.DBName, Prefix: st.Prefix, Rate: o.Rate}}
	defer r.stopWorkers() // after the keep phase: it is there to explore running workers
	defer func() {
		if r.tokenFile != "" {
			_ = os.Remove(r.tokenFile)
		}
	}()
	if err := r.all(ctx); err != nil {
		return r.sum, err
	}
	r.sum.Write(o.Out)
	if o.Keep {
		r.keep(ctx)
	}
	return r.sum, r.sum.failure()
}
