package demo

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/worker"
	"github.com/quotaflow/billing/internal/workload"
)

type run struct {
	o       Options
	st      *scenario.Stage
	keys    keyspace.Keyspace // the stage's Redis keys
	log     *zap.Logger
	sum     *Summary
	traffic scenario.Traffic
	workers [2]*demoWorker
	spans   *spanRecorder // under --trace
	// hotGrant is the hot merchant's first grant (0 without one).
	hotGrant int64
	// produced counts messages acknowledged by the broker so far.
	produced atomic.Int64
	// Under --keep: the read API of the first worker, its token and token file.
	adminAddr, token, tokenFile string
}

// demoWorker is a billing worker of the demo, running in the background.
type demoWorker struct {
	*worker.Worker
	cancel context.CancelFunc
	done   chan error
}

func (r *run) say(format string, args ...any) { fmt.Fprintf(r.o.Out, format+"\n", args...) }

func (r *run) all(ctx context.Context) error {
	o := r.o
	var err error
	r.say("demo: broker %v (embedded=%v), database %s, redis prefix %q", r.st.Brokers, r.st.Cluster != nil, r.st.DBName, r.st.Prefix)
	if r.traffic, err = scenario.BuildTraffic(o.workload(), o.Events, o.Conflicts); err != nil {
		return err
	}
	r.sum.Traffic = r.traffic
	if o.Trace {
		r.spans = newSpanRecorder()
	}
	if o.Keep { // before the workers, which then consume it from the start
		if err := r.createGrantsTopic(ctx); err != nil {
			return err
		}
	}
	if r.workers[0], err = r.startWorker(ctx, 1, true); err != nil {
		return err
	}
	if err := r.grant(ctx); err != nil {
		return err
	}
	if err := r.shardHot(ctx); err != nil {
		return err
	}
	if r.workers[1], err = r.startWorker(ctx, 2, false); err != nil {
		return err
	}
	if err := r.consume(ctx); err != nil {
		return err
	}
	if r.spans != nil {
		printTrace(r.o.Out, r.spans.pick())
	}
	if err := r.hydrate(ctx); err != nil {
		return err
	}
	if err := r.corrupt(ctx); err != nil {
		return err
	}
	if err := r.reconcile(ctx); err != nil {
		return err
	}
	return r.check(ctx)
}

func (r *run) startWorker(ctx context.Context, id int, http bool) (*demoWorker, error) {
	env := r.st.WorkerEnv(id, r.o.RedisAddrs, "127.0.0.1:0", r.o.LogLevel)
	env["WORKER_COMMIT_INTERVAL"], env["SHUTDOWN_TIMEOUT"] = "200ms", "10s"
	env["KAFKA_GRANTS_TOPIC"] = r.grantsTopic()
	if http && r.o.Keep {
		if err := r.serveAdmin(env); err != nil {
			return nil, err
		}
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedKafka, config.NeedWorkerID)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	opts := worker.Options{NoHTTP: !http}
	if r.spans != nil {
		opts.SpanExporter = r.spans
	}
	w, err := worker.New(wctx, cfg, r.log.With(zap.Int("worker", id)), opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("demo: start worker %d: %w", id, err)
	}
	rw := &demoWorker{Worker: w, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(wctx) }()
	if http {
		r.sum.HTTPAddr = w.HTTPAddr.String()
		if w.AdminAddr != nil {
			r.adminAddr = w.AdminAddr.String()
		}
	}
	return rw, nil
}

func (w *demoWorker) stop() error {
	if w == nil || w.cancel == nil {
		return nil
	}
	w.cancel()
	w.cancel = nil
	return <-w.done
}

func (r *run) stopWorkers() {
	for _, w := range r.workers {
		if err := w.stop(); err != nil {
			r.log.Error("worker stopped with an error", zap.Error(err))
		}
	}
}

// grant gives every merchant quota, except a few left unknown to billing;
// some get nearly nothing, and the hot one less than its traffic needs, so
// every outcome shows up.
func (r *run) grant(ctx context.Context) error {
	merchants := workload.MerchantIDs(r.o.Merchants)
	unknown := 3
	known := merchants[:len(merchants)-unknown]
	r.sum.Unknown = unknown
	p := newProgress(r.o.Out, r.o.Terminal, "grant", int64(len(known)))
	defer p.done()
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, m := range known {
		amount := int64(5_000)
		hot := int64(float64(r.o.Events)*r.o.Hot*5.5) / 2 // the hot merchant runs dry halfway
		switch {
		case i == 0 && hot > 0: // with --hot 0 there is no hot merchant
			amount = hot
			r.hotGrant = hot
		case i%10 == 3:
			amount = 10 // nearly empty
			r.sum.NearlyEmpty++
		}
		g.Go(func() error {
			if _, err := r.workers[0].Path().Deductor.Grant(gctx, m, amount, "grant-"+m); err != nil {
				return fmt.Errorf("demo: grant %s: %w", m, err)
			}
			p.set(done.Add(1))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return r.setAlerts(ctx, known[:3])
}

// shardHot splits the hottest merchant's quota over --shards shards, with
// the operator's command's code, and has the first worker route by it at once
// (the second reads it as it starts).
func (r *run) shardHot(ctx context.Context) error {
	if r.o.Shards == 1 {
		return nil
	}
	hot := workload.MerchantIDs(1)[0]
	if _, err := r.workers[0].Path().Deductor.Reshard(ctx, hot, r.o.Shards); err != nil {
		return fmt.Errorf("demo: shard %s: %w", hot, err)
	}
	r.say("sharded %s over %d quota shards", hot, r.o.Shards)
	return r.workers[0].Path().Shards.Refresh(ctx)
}

// consume produces the traffic while the workers consume it, restarts the
// second worker when about half of it is done, and waits until the group has
// committed everything.
func (r *run) consume(ctx context.Context) error {
	writer := workload.NewKafkaWriter(r.st.Brokers, r.st.Topic, r.st.Transport)
	defer writer.Close()
	start := time.Now()
	ahead, later := splitRefunds(r.traffic.Refunds)
	if err := r.produceRefunds(ctx, ahead); err != nil { // they wait for their payments
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.produce(gctx, writer) })
	g.Go(func() error { return r.follow(gctx) })
	g.Go(func() error { return r.produceAlong(gctx, later) })
	if err := g.Wait(); err != nil {
		return err
	}
	if err := scenario.WaitDrained(ctx, r.st.Client(), r.st.Group+".refunds", r.st.RefundsTopic, nil); err != nil {
		return err
	}
	r.sum.ConsumeTime = time.Since(start)
	return nil
}

// follow shows progress from the group's committed offsets, restarts the
// second worker halfway, and returns once everything produced is committed.
func (r *run) follow(ctx context.Context) error {
	total := int64(len(r.traffic.Messages))
	client := r.st.Client()
	p := newProgress(r.o.Out, r.o.Terminal, "consume", total)
	defer p.done()
	restarted, granted := false, false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// produced is read before the lag: read after, it could count the
		// last messages that an empty topic's lag of 0 had not seen yet.
		produced := r.produced.Load()
		if lag, err := scenario.GroupLag(ctx, client, r.st.Group, r.st.Topic); err == nil {
			processed := max(0, produced-lag)
			p.set(processed)
			if !granted && r.o.Hot > 0 && processed >= total*3/4 {
				// The hot merchant ran dry halfway: a grant lifts it (quota.recovered).
				granted = true
				m := workload.MerchantIDs(r.o.Merchants)[0]
				if _, err := r.workers[0].Path().Deductor.Grant(ctx, m, max(r.hotGrant/2, 1), "grant-midway-"+m); err != nil {
					return fmt.Errorf("demo: midway grant: %w", err)
				}
				r.sum.MidwayGrant = m
			}
			if !restarted && !r.o.NoRestart && processed >= total/2 {
				restarted = true
				if err := r.restartSecond(ctx); err != nil {
					return err
				}
			}
			if produced == total && lag == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// restartSecond stops the second worker (it leaves the group, the first takes
// its partitions) and starts it again under the same worker ID.
func (r *run) restartSecond(ctx context.Context) error {
	if err := r.workers[1].stop(); err != nil {
		return fmt.Errorf("demo: stop worker 2: %w", err)
	}
	w, err := r.startWorker(ctx, 2, false)
	if err != nil {
		return err
	}
	r.workers[1] = w
	r.sum.Restarts++
	return nil
}

// produce writes the traffic: as fast as the broker takes it, or paced at
// Rate with occurred_at stamped at send time so latency is end to end.
func (r *run) produce(ctx context.Context, w *kafka.Writer) error {
	msgs := r.traffic.Messages
	if r.o.Rate == 0 {
		return scenario.Produce(ctx, w, msgs, func(done int) { r.produced.Store(int64(done)) })
	}
	const tick = 10 * time.Millisecond
	perTick := max(1, int(r.o.Rate*tick.Seconds()))
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for i := 0; i < len(msgs); i += perTick {
		chunk := append([]kafka.Message(nil), msgs[i:min(i+perTick, len(msgs))]...)
		for j := range chunk {
			chunk[j].Value = restamp(chunk[j].Value, time.Now())
		}
		if err := w.WriteMessages(ctx, chunk...); err != nil {
			return fmt.Errorf("demo: produce: %w", err)
		}
		r.produced.Add(int64(len(chunk)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	return nil
}

// restamp sets occurred_at of a valid event to at; anything else is sent as it is.
func restamp(value []byte, at time.Time) []byte {
	e, err := event.Decode(nil, value)
	if err != nil {
		return value
	}
	e.OccurredAt = at.UTC()
	return e.Encode()
}
