package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// Run runs every strategy of cfg, one after the other, each on a fresh
// database and key prefix, and reports. A strategy that fails is reported
// with its error and the next one still runs; the returned error is for
// problems that prevent the whole run (configuration, unreachable MySQL).
func Run(ctx context.Context, cfg Config, rdb redis.UniversalClient, log *zap.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	msgs, err := workload.Generate(cfg.workload(), cfg.Events)
	if err != nil {
		return nil, err
	}
	events := make([]event.PaymentSucceeded, len(msgs))
	for i, m := range msgs {
		events[i] = m.Event
	}
	admin, err := sql.Open("mysql", cfg.AdminDSN)
	if err != nil {
		return nil, fmt.Errorf("bench: open MySQL: %w", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("bench: connect to MySQL: %w", err)
	}
	rep := newReport(cfg, events)
	rep.Host.MySQL = serverVersion(ctx, admin)
	rep.Host.Redis = scenario.RedisVersion(ctx, rdb)
	run := scenario.RunID()
	for _, name := range cfg.Strategies {
		if ctx.Err() != nil {
			break
		}
		r := runner{cfg: cfg, admin: admin, rdb: rdb, log: log.With(zap.String("strategy", name)), run: run, events: events}
		rep.Results = append(rep.Results, r.runOne(ctx, name))
	}
	rep.finish()
	return rep, ctx.Err()
}

// runner runs one strategy.
type runner struct {
	cfg    Config
	admin  *sql.DB
	rdb    redis.UniversalClient
	log    *zap.Logger
	run    string
	events []event.PaymentSucceeded
}

func (r runner) runOne(ctx context.Context, name string) Result {
	res := Result{Strategy: name, Events: len(r.events)}
	if err := r.runStrategy(ctx, name, &res); err != nil {
		res.Error = err.Error()
		r.log.Error("strategy failed", zap.Error(err))
	}
	return res
}

func (r runner) runStrategy(ctx context.Context, name string, res *Result) (err error) {
	s, err := NewStrategy(name, r.cfg.LockTTL)
	if err != nil {
		return err
	}
	// Worker ID 0 and no lease: each strategy has a database of its own, so
	// one generator per database keeps ids unique.
	gen, err := idgen.New(0, idgen.Options{})
	if err != nil {
		return fmt.Errorf("bench: id source: %w", err)
	}
	ids := idgen.Int64s{Generator: gen}
	keys, err := keyspace.New(r.cfg.KeyPrefix + r.run + ":" + name + ":")
	if err != nil {
		return err
	}
	res.Database, res.KeyPrefix = databaseName(name, r.run), keys.Prefix()
	if !r.cfg.Keep {
		cleanup := context.WithoutCancel(ctx) // drop what we made even after an interrupt
		defer func() {
			cctx, cancel := context.WithTimeout(cleanup, time.Minute)
			defer cancel()
			err = errors.Join(err, scenario.DropDatabase(cctx, r.admin, res.Database), scenario.DeletePrefix(cctx, r.rdb, keys.Prefix()))
		}()
	}
	db, err := openDatabase(ctx, r.admin, r.cfg.AdminDSN, res.Database, r.cfg.Callers+4)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := ledgerdb.New(db.pool, ids, nil, ledgerdb.Options{})
	if err != nil {
		return fmt.Errorf("bench: ledger: %w", err)
	}
	defer store.Close()
	if err := grant(ctx, store, workload.MerchantIDs(r.cfg.Merchants), r.cfg.Quota); err != nil {
		return err
	}
	env := &Env{GORM: db.DB, Store: store, Redis: r.rdb, Keys: keys, Log: r.log}
	if err := s.Setup(ctx, env); err != nil {
		return errors.Join(fmt.Errorf("bench: set up %s: %w", name, err), s.Close())
	}
	r.log.Info("strategy running", zap.String("database", res.Database), zap.Int("events", len(r.events)),
		zap.Int("callers", r.cfg.Callers))
	runErr := r.drive(ctx, s, res)
	closeErr := s.Close()
	res.Counters = s.Counters()
	if err := errors.Join(runErr, closeErr); err != nil {
		return err
	}
	res.Check, err = check(ctx, env, r.events, s.RedisBalances())
	if err != nil {
		return err
	}
	r.log.Info("strategy done", zap.Float64("events_per_sec", res.EventsPerSec), zap.Bool("check_ok", res.Check.OK()))
	return nil
}

// drive runs the callers, times them and counts the server's deadlocks
// meanwhile.
func (r runner) drive(ctx context.Context, s Strategy, res *Result) error {
	before, err := scenario.GlobalStatus(ctx, r.admin, scenario.InnoDBDeadlocks)
	if err != nil {
		return err
	}
	srcs := sources(r.events, r.cfg.Callers, r.cfg.Batch, s.Batched())
	lat := make([][]time.Duration, len(srcs))
	var done atomic.Int64
	stopProgress := r.progress(&done)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for i, src := range srcs {
		lat[i] = make([]time.Duration, 0, len(r.events)/len(srcs)+1)
		g.Go(func() error {
			for b := src.next(); len(b) > 0; b = src.next() {
				t0 := time.Now()
				if err := s.Apply(gctx, b); err != nil {
					return fmt.Errorf("bench: %s: apply %d events (first %s): %w", res.Strategy, len(b), b[0].EventID, err)
				}
				d := time.Since(t0)
				for range b {
					lat[i] = append(lat[i], d)
				}
				done.Add(int64(len(b)))
			}
			return nil
		})
	}
	err = g.Wait()
	elapsed := time.Since(start)
	stopProgress()
	after, statusErr := scenario.GlobalStatus(context.WithoutCancel(ctx), r.admin, scenario.InnoDBDeadlocks)
	if statusErr == nil { // per event applied: a failed run stopped short
		res.Deadlocks = scenario.DeadlocksOver(before, after, int(done.Load()))
	}
	if err := errors.Join(err, statusErr); err != nil {
		return err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	res.Elapsed = elapsed
	res.EventsPerSec = float64(len(r.events)) / elapsed.Seconds()
	res.Latency = summarize(all)
	return nil
}

// progress logs how far the run is every 5s until the returned stop is called.
func (r runner) progress(done *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.log.Info("progress", zap.Int64("applied", done.Load()), zap.Int("events", len(r.events)))
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func serverVersion(ctx context.Context, db *sql.DB) string {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "unknown"
	}
	return v
}
