package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// groupLimit bounds the wait for a paced run's consumer group to form.
const groupLimit = time.Minute

// Run sets up, measures and removes one load run. The Result is filled as
// far as the run got; the error says what failed or what was waited for.
func Run(ctx context.Context, o Options) (res Result, err error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	res.StartedAt = time.Now().UTC()
	st, err := newStage(ctx, o)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.teardown()) }()
	r := &run{o: o, st: st, res: &res}
	err = r.all(ctx)
	return res, err
}

// run is one load run in progress.
type run struct {
	o       Options
	st      *stage
	res     *Result
	idPfx   string
	fill    filled
	workers []*workerProc
	// payments is how many of the events are new payments (the rest are
	// duplicates or refunds): one debit row each.
	payments int
	// preloaded is the start of the preloaded stream: with RefundsAfter,
	// its refunds are produced from it again once its payments are recorded.
	preloaded time.Time
}

func (r *run) all(ctx context.Context) error {
	o, st := r.o, r.st
	r.res.Setup = Setup{
		Database: st.DBName, KeyPrefix: st.Prefix, Topic: st.Topic, Brokers: st.Brokers, Embedded: st.Cluster != nil,
		Partitions: o.Partitions, Merchants: o.Merchants, Hot: o.Hot, Refunds: o.Refunds, RefundsOrder: o.refundsOrder(), Shards: o.Shards, Seed: o.Seed, Workers: o.Workers,
		WorkerBinary: o.WorkerBinary, WorkerEnv: o.WorkerEnv, LedgerRows: o.LedgerRows, OrderedIDs: o.OrderedIDs, Rate: o.Rate,
		IdleS: o.Idle.Seconds(),
	}
	r.res.Host = host(ctx, st)
	r.res.Events = o.Events
	r.idPfx = "ld" + strings.ReplaceAll(st.ID, "_", "") + "-"
	o.Log.Info("load: granting quota", zap.String("database", st.DBName), zap.Int("merchants", o.Merchants), zap.Int("ledger_rows", o.LedgerRows))
	t0 := time.Now()
	var err error
	if r.fill, err = grant(ctx, st.db, workload.MerchantIDs(o.Merchants), o.LedgerRows, r.idPfx, o.Events, o.OrderedIDs); err != nil {
		return err
	}
	if o.Shards > 1 {
		// Before any worker: no quota hash exists yet, so the layout needs no fold.
		if _, err := st.db.ExecContext(ctx, "INSERT INTO merchant_shards (merchant_id, shards) VALUES (?, ?)",
			workload.MerchantIDs(1)[0], o.Shards); err != nil {
			return fmt.Errorf("load: shard the hot merchant: %w", err)
		}
	}
	if o.LedgerRows > 0 {
		if err := warm(ctx, st.db); err != nil {
			return err
		}
	}
	r.res.FillS = time.Since(t0).Seconds()
	if o.Idle > 0 {
		return r.idle(ctx)
	}
	var t target
	if o.Rate == 0 {
		if err := r.preload(ctx, &t); err != nil {
			return err
		}
	}
	if err := r.measure(ctx, &t); err != nil {
		return err
	}
	if o.BaselineEvents > 0 {
		o.Log.Info("load: rowlock baseline", zap.Int("events", o.BaselineEvents))
		r.res.Baseline = baseline(ctx, o, st)
		if b := r.res.Baseline; o.Rate == 0 && b.EventsPerSec > 0 {
			b.Ratio = r.res.EventsPerSec / b.EventsPerSec // a paced run's rate is the schedule's: no ratio
		}
	}
	return nil
}

// preload writes the events to the topics before any worker starts: all of
// them, or with RefundsAfter the payments alone (refundsAfter writes the rest).
func (r *run) preload(ctx context.Context, t *target) error {
	r.o.Log.Info("load: preloading", zap.Int("events", r.o.Events))
	start := time.Now()
	to := allTopics
	if r.o.refundsOrder() == RefundsAfter {
		to = paymentsOnly
	}
	st, err := r.produce(ctx, start, true, to)
	if err != nil {
		return err
	}
	if to == allTopics {
		r.res.Refunds = st.Summary.Refunds
	}
	t.set(r.fill.debited+st.Summary.Amount, r.res.Refunds)
	r.payments, r.preloaded = st.Summary.Valid, start
	r.res.PreloadS = time.Since(start).Seconds()
	return nil
}

// refundsAfter produces the refunds of the preloaded stream (the same
// generator from the same seed and start, its payments dropped), once the
// workers have recorded the payments, and waits for every refund.
func (r *run) refundsAfter(ctx context.Context, t *target) (time.Time, error) {
	r.o.Log.Info("load: payments recorded, producing their refunds")
	st, err := r.produce(ctx, r.preloaded, true, refundsOnly)
	if err != nil {
		return time.Now(), err
	}
	r.res.Refunds = st.Summary.Refunds
	t.set(t.Load().debited, r.res.Refunds)
	return waitLedger(ctx, r.st.db, t, r.workers, r.o.Stall, r.o.Log)
}

// topics says which of a stream's messages a produce writes; the others are
// generated (the stream stays the same) and dropped.
type topics int

const (
	allTopics topics = iota
	paymentsOnly
	refundsOnly
)

// discard is a writer that drops what it is handed.
type discard struct{}

func (discard) WriteMessages(context.Context, ...kafka.Message) error { return nil }

// produced is what the producer did: its own stats and, paced, when the
// broker acknowledged each event.
type produced struct {
	workload.ScheduleStats
	// ackedAt[k] is when the broker acknowledged the event due k steps
	// after the schedule's start, in microseconds from that start.
	ackedAt []int64
	step    time.Duration
}

// produce writes the run's events of the topics to, from start on (unpaced:
// all at once), and returns once the broker acknowledged every one.
func (r *run) produce(ctx context.Context, start time.Time, unpaced bool, to topics) (produced, error) {
	cfg := workload.Config{Seed: r.o.Seed, Merchants: r.o.Merchants, Skew: workload.HotSkew(r.o.Hot), IDPrefix: r.idPfx, Start: start, Refunds: r.o.Refunds}
	if !unpaced {
		cfg.Step = time.Duration(float64(time.Second) / r.o.Rate)
	}
	g, err := workload.New(cfg)
	if err != nil {
		return produced{}, err
	}
	p := produced{step: cfg.Step}
	if !unpaced {
		p.ackedAt = make([]int64, r.o.Events)
	}
	var mu sync.Mutex
	var acked int
	var ackErr error
	completion := func(msgs []kafka.Message, err error) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			ackErr = errors.Join(ackErr, err)
			return
		}
		acked += len(msgs)
		for _, m := range msgs {
			if k, ok := p.seq(m.Time.Sub(start).Microseconds()); ok {
				p.ackedAt[k] = now.UnixMicro() - start.UnixMicro() // wall clock, as created_at
			}
		}
	}
	// Asynchronous: the schedule never waits for a batch; Close waits for the last completion.
	w := workload.NewKafkaWriter(r.st.Brokers, r.st.Topic, r.st.Transport)
	w.Async, w.Completion = true, completion
	rw := workload.NewKafkaWriter(r.st.Brokers, r.st.RefundsTopic, r.st.Transport)
	rw.Async, rw.Completion = true, completion
	ws := workload.Writers{Payments: w, Refunds: rw}
	switch to {
	case paymentsOnly:
		ws.Refunds = discard{}
	case refundsOnly:
		ws.Payments = discard{}
	}
	p.ScheduleStats, err = workload.ProduceOnSchedule(ctx, ws, g, r.o.Events, unpaced, nil)
	err = errors.Join(err, w.Close(), rw.Close()) // flush, and wait for the last completions
	mu.Lock()
	defer mu.Unlock()
	s := p.Summary
	want := s.Messages
	switch refunds := s.Refunds + s.RefundDuplicates; to {
	case paymentsOnly:
		want -= refunds
	case refundsOnly:
		want = refunds
	}
	if err == nil && (ackErr != nil || acked != want) {
		err = fmt.Errorf("load: the broker acknowledged %d of %d events: %w", acked, want, ackErr)
	}
	return p, err
}

// seq is the step of the schedule an event due dueUS microseconds after its
// start is: the database keeps microseconds, the schedule nanoseconds.
func (p *produced) seq(dueUS int64) (int, bool) {
	if p.step <= 0 {
		return 0, false
	}
	k := int(math.Round(float64(dueUS) * float64(time.Microsecond) / float64(p.step)))
	return k, k >= 0 && k < len(p.ackedAt)
}

// measure starts the workers, (paced) produces while they run, waits for
// the last ledger row, reads the meters and stops the workers.
func (r *run) measure(ctx context.Context, t *target) (err error) {
	o := r.o
	m, err := newMeter(ctx, o, r.st)
	if err != nil {
		return err
	}
	counters, err := scenario.GlobalStatus(ctx, r.st.db, innodbCounters...)
	if err != nil {
		return err
	}
	start := time.Now()
	defer func() { err = errors.Join(err, r.stopWorkers()) }()
	for i := range o.Workers {
		w, err := startWorker(o, r.st, i)
		if err != nil {
			return err
		}
		r.workers = append(r.workers, w)
		m.addWorker(w)
	}
	o.Log.Info("load: workers started", zap.Int("workers", o.Workers), zap.String("group", r.st.Group))
	smp := startSampler(ctx, r.workers, start, o.SampleEvery)
	defer func() { r.res.Memory = smp.finish() }()

	var end time.Time
	var paced produced
	var schedStart time.Time
	g, gctx := errgroup.WithContext(ctx)
	if o.Rate > 0 {
		if err := waitGroup(ctx, r.st.Client(), r.st.Group, r.st.Topic, o.Workers, r.workers, groupLimit); err != nil {
			return err
		}
		schedStart = time.Now().Add(10 * time.Millisecond)
		o.Log.Info("load: producing on schedule", zap.Float64("rate", o.Rate), zap.Int("events", o.Events))
		g.Go(func() error {
			var err error
			if paced, err = r.produce(gctx, schedStart, false, allTopics); err == nil {
				t.set(r.fill.debited+paced.Summary.Amount, 0)
				r.payments = paced.Summary.Valid
			}
			return err
		})
	}
	g.Go(func() error {
		var err error
		end, err = waitLedger(gctx, r.st.db, t, r.workers, o.Stall, o.Log)
		if err == nil && o.refundsOrder() == RefundsAfter {
			end, err = r.refundsAfter(gctx, t)
		}
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	m.read()
	r.res.Memory = smp.finish() // before the workers go: their exit is no sample
	r.res.LedgerRetries = ledgerRetries(r.res.Memory)
	window := end.Sub(start)
	r.res.ElapsedS = window.Seconds()
	r.res.EventsPerSec = float64(o.Events) / window.Seconds()
	r.res.CPU, r.res.SystemUSPerEvent, r.res.Machine = m.results(o.Events, window)
	if r.res.InnoDB, err = innoDB(ctx, r.st.db, counters, o.Events); err != nil {
		return err
	}
	if err := r.stopWorkers(); err != nil {
		return err
	}
	return r.check(ctx, start, end, schedStart, paced)
}

// check counts the run's rows (one per event, none rejected) and, paced,
// reads the latencies.
func (r *run) check(ctx context.Context, start, end, schedStart time.Time, paced produced) error {
	o := r.o
	rows, rejected, first, last, err := runRows(ctx, r.st.db, r.fill.lastID)
	if err != nil {
		return err
	}
	r.res.Rows = rows
	if rows != int64(r.payments) || rejected != 0 {
		return fmt.Errorf("load: %d ledger rows (%d rejected) for %d payments: want one debit per payment", rows, rejected, r.payments)
	}
	r.res.FirstRowS = first.Sub(start).Seconds()
	if span := last.Sub(first).Seconds(); span > 0 {
		r.res.SteadyPerSec = float64(o.Events-1) / span
	}
	if o.Rate == 0 {
		return nil
	}
	p := &Paced{Rate: o.Rate, ScheduleS: float64(o.Events) / o.Rate, ProducerLagMS: ms(paced.MaxLag)}
	lastDue := schedStart.Add(time.Duration(float64(o.Events-1) / o.Rate * float64(time.Second)))
	p.DrainMS = ms(end.Sub(lastDue))
	// Kept up: the ledger was done soon after the last event was due (a
	// second, or 5% of the schedule). A late producer does not make the
	// system late; its lag is inside the latencies and reported beside them.
	p.KeptUp = p.DrainMS <= max(1000, 50*p.ScheduleS)
	if p.Latency, p.Ack, p.AfterAck, err = latency(ctx, r.st.db, r.fill.lastID, schedStart, o.Warmup, &paced); err != nil {
		return err
	}
	p.LedgerTx = ledgerTx(r.res.Memory, (schedStart.Sub(start) + o.Warmup).Seconds())
	r.res.Paced = p
	return nil
}

// stopWorkers stops every worker still running (SIGTERM, drain); once.
func (r *run) stopWorkers() error {
	var errs []error
	for _, w := range r.workers {
		errs = append(errs, w.stop())
	}
	r.workers = nil
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// host reads what the figures depend on; unknown values stay zero.
func host(ctx context.Context, st *stage) Host {
	h := Host{CPUs: runtime.NumCPU()}
	_ = st.db.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_buffer_pool_size, @@innodb_flush_log_at_trx_commit").
		Scan(&h.MySQL, &h.BufferPoolBytes, &h.FlushLogAtTrxCommit)
	h.RedoLogBytes = redoLogBytes(ctx, st.db)
	h.Redis = scenario.RedisVersion(ctx, st.Redis)
	return h
}
