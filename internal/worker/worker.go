// Package worker assembles billing-worker from a Config: the consumers of
// payments, grants and refunds, the balance-event relay, the periods loop, the schema
// gate and the ops and read API servers, on the shared write path. Its main
// and the demo both call New, so the demo runs exactly the production wiring.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/httpserver"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/outbox"
	"github.com/quotaflow/billing/internal/plan"
	"github.com/quotaflow/billing/internal/stepaside"
	"github.com/quotaflow/billing/internal/tracing"
	"github.com/quotaflow/billing/internal/writepath"
)

// Worker is one billing-worker: a consumer-group member running the write path.
type Worker struct {
	log      *zap.Logger
	svc      *writepath.Services
	path     *writepath.Path
	consumer *consumer.Consumer[event.PaymentSucceeded]
	grants   *waitingConsumer[event.GrantCommand]  // the grants topic, in a group of its own
	refunds  *waitingConsumer[event.RefundCommand] // the refunds topic, in a group of its own
	schema   *schemaGate
	http     *httpserver.Server
	pprof    *httpserver.Server // nil unless PPROF_ADDR is set
	admin    *httpserver.Server // the read API; nil unless ADMIN_ADDR is set
	traces   *tracing.Provider  // nil while tracing is off
	// relay publishes the balance events the write path puts in the outbox.
	relay *outbox.Relay
	// periods records grant expiries and issues plan grants.
	periods *periods
	// aside takes the consumers, the relay and the periods loop out while
	// the Snowflake generator refuses for longer than IDGEN_STEP_ASIDE_AFTER.
	aside       *stepaside.Monitor
	relayWriter *kafka.Writer
	// HTTPAddr is where the ops endpoints listen (resolved, so ":0" works).
	HTTPAddr net.Addr
	// AdminAddr is where the read API listens; nil while it is off.
	AdminAddr net.Addr
}

// Options are the optional parts of New.
type Options struct {
	Registry *prometheus.Registry // receives every metric; nil makes a fresh one
	NoHTTP   bool                 // skips the ops server (tests and the demo's second worker)
	// SpanExporter receives every span as it ends, whatever the OTEL_*
	// variables say (tests, the demo's printed trace); nil follows them.
	SpanExporter sdktrace.SpanExporter
	// Clock is the Snowflake generator's and its lease's (tests set it
	// back); nil: the system clock.
	Clock idgen.Clock
}

// New builds a worker; it leases its Snowflake worker ID first (see writepath.Lease).
func New(ctx context.Context, cfg config.Config, log *zap.Logger, opts Options) (_ *Worker, err error) {
	if cfg.IDGen.WorkerID < 0 {
		return nil, errors.New("worker: no Snowflake worker ID (set IDGEN_WORKER_ID or POD_NAME)")
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return nil, errors.New("worker: KAFKA_BROKERS is empty")
	}
	reg := cmp.Or(opts.Registry, prometheus.NewRegistry())
	w := &Worker{log: log}
	if w.svc, err = writepath.OpenServices(ctx, cfg, "billing-worker", log); err != nil {
		return nil, err
	}
	w.svc.Clock = opts.Clock
	defer func() {
		if err != nil {
			for _, srv := range []*httpserver.Server{w.http, w.admin, w.pprof} {
				if srv != nil {
					srv.Close()
				}
			}
			w.close()
		}
	}()
	m, err := registerAll(reg, cfg.Kafka)
	if err != nil {
		return nil, err
	}
	// Serve /healthz before the lease wait (up to two lease TTLs), so the
	// kubelet sees a live process; /readyz says what is still missing.
	if !opts.NoHTTP {
		w.http = httpserver.New(cfg.HTTPAddr, reg, log)
		w.http.AddReadiness("redis", w.svc.PingRedis)
		w.http.AddReadiness("mysql", w.svc.PingMySQL)
		w.http.AddReadiness("idgen_lease", func(context.Context) error { return errWaitingForLease })
		if w.HTTPAddr, err = w.http.Listen(); err != nil {
			return nil, fmt.Errorf("worker: HTTP_ADDR=%q: %w", cfg.HTTPAddr, err)
		}
		if err = w.http.Start(); err != nil {
			return nil, fmt.Errorf("worker: HTTP_ADDR=%q: %w", cfg.HTTPAddr, err)
		}
	}
	if w.relay, w.relayWriter, err = newRelay(cfg, w.svc, m.outbox, log); err != nil {
		return nil, err
	}
	if w.path, err = writepath.Open(ctx, cfg, w.svc, m.path, log, w.relay.Wake); err != nil {
		return nil, err
	}
	w.periods = newPeriods(w.path.Deductor, w.path.Ledger, plan.NewStore(w.svc.SQL), log.Named("periods"))
	if w.aside, err = stepaside.New(w.path.IDs.Check, cfg.IDGen.StepAsideAfter, log, m.aside); err != nil {
		return nil, err
	}
	if w.traces, err = newTraces(ctx, cfg.Tracing, opts.SpanExporter); err != nil {
		return nil, err
	}
	handler := &billingHandler{deductor: w.path.Deductor, metrics: m.handler, log: log, granted: w.periods.Wake}
	if cfg.Worker.ShardedAnyKey {
		handler.keys = &anyKeys{shards: w.path.Shards}
	}
	ccfg := consumerConfig(cfg, w.svc)
	ccfg.Tracer, ccfg.Gate = w.traces.Tracer(), w.aside
	r := router{shards: w.path.Shards, anyKey: cfg.Worker.ShardedAnyKey}
	w.consumer, err = consumer.New(ccfg, r.decode, handler, w.probe, log, m.consumer)
	if err != nil {
		return nil, err
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Kafka.Brokers...), Transport: w.svc.Kafka.Transport, Timeout: 5 * time.Second}
	ccfg.Topic, ccfg.Group = cfg.Kafka.GrantsTopic, cfg.Kafka.GrantsGroup()
	gc, err := consumer.New(ccfg, decodeGrant, (*grantHandler)(handler), w.probe, log, m.grants)
	if err != nil {
		return nil, err
	}
	w.grants = &waitingConsumer[event.GrantCommand]{Consumer: gc, what: "grants", topic: ccfg.Topic, log: log, client: client}
	ccfg.Topic, ccfg.Group = cfg.Kafka.RefundsTopic, cfg.Kafka.RefundsGroup()
	rc, err := consumer.New(ccfg, decodeRefund, (*refundHandler)(handler), w.probe, log, m.refunds)
	if err != nil {
		return nil, err
	}
	w.refunds = &waitingConsumer[event.RefundCommand]{Consumer: rc, what: "refunds", topic: ccfg.Topic, log: log, client: client}
	m.handler.pending.watch(w.path.Ledger, cfg.Worker.RefundPendingAge, log)
	w.schema = newSchemaGate(w.svc.SQL, log)
	if w.http != nil {
		w.http.AddReadiness("schema", w.schema.ready)
		w.http.AddReadiness("kafka", w.consumer.Ready)
		w.http.AddReadiness("kafka_grants", w.grants.Ready)
		w.http.AddReadiness("kafka_refunds", w.refunds.Ready)
		w.http.AddReadiness("idgen_lease", w.leaseHeld)
		w.http.AddReadiness("idgen_step_aside", w.aside.Ready)
	}
	if cfg.Admin.Addr != "" {
		if err = w.listenAdmin(cfg, m, log); err != nil {
			return nil, err
		}
	}
	if cfg.PprofAddr != "" {
		w.pprof = httpserver.NewPprof(cfg.PprofAddr, log)
		if _, err = w.pprof.Listen(); err != nil {
			return nil, fmt.Errorf("worker: PPROF_ADDR=%q: %w", cfg.PprofAddr, err)
		}
	}
	return w, nil
}

// listenAdmin binds the read API (Run serves it): the balance view of quota
// show, the ledger store, and the event lookup of billingctl event show.
func (w *Worker) listenAdmin(c config.Config, m *workerMetrics, log *zap.Logger) (err error) {
	dc, err := dlq.NewClient(dlq.Broker{Addrs: c.Kafka.Brokers, Dialer: w.svc.Kafka.Dialer, Transport: w.svc.Kafka.Transport})
	if err != nil {
		return err
	}
	cfg := c.Admin
	api, err := adminapi.New(w.path.Deductor, w.path.Ledger, adminapi.NewEvents(w.svc.SQL, dc, c.Kafka.DLQTopic),
		adminapi.Options{TokenFile: cfg.TokenFile, Rate: cfg.Rate, Burst: cfg.Burst}, log, m.admin)
	if err != nil {
		return err
	}
	w.admin = httpserver.NewHandler(cfg.Addr, api, log)
	if w.AdminAddr, err = w.admin.Listen(); err != nil {
		return fmt.Errorf("worker: ADMIN_ADDR=%q: %w", cfg.Addr, err)
	}
	return nil
}

// probe tells the consumer whether a failure is an outage (retry without
// counting attempts) or the message's own fault. A lapsed worker-ID lease is an
// outage too: no ledger row can be written until it is back.
func (w *Worker) probe(ctx context.Context) error {
	return errors.Join(w.svc.PingRedis(ctx), w.svc.PingMySQL(ctx), w.leaseHeld(ctx))
}

// Path is the worker's write path: its Deductor, ledger store and shard cache.
func (w *Worker) Path() *writepath.Path { return w.path }

var errWaitingForLease = errors.New("idgen: waiting for the worker-ID lease")

func (w *Worker) leaseHeld(context.Context) error {
	if !w.path.Lease.Valid() {
		return errors.New("idgen: worker-ID lease not held")
	}
	return nil
}

func consumerConfig(cfg config.Config, svc *writepath.Services) consumer.Config {
	return consumer.Config{
		Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.Topic, Group: cfg.Kafka.Group, DLQTopic: cfg.Kafka.DLQTopic,
		Lanes: cfg.Worker.Lanes, BatchSize: cfg.Worker.BatchSize, LatencyBudget: cfg.Worker.LatencyBudget,
		MaxInFlightPerPartition: cfg.Worker.MaxInFlight, CommitInterval: cfg.Worker.CommitInterval,
		MaxAttempts: cfg.Worker.MaxAttempts, ShutdownTimeout: cfg.Worker.ShutdownTimeout,
		Dialer: svc.Kafka.Dialer, Transport: svc.Kafka.Transport,
		SessionTimeout:    cfg.Kafka.SessionTimeout,
		HeartbeatInterval: min(3*time.Second, cfg.Kafka.SessionTimeout/3),
	}
}

// Run consumes until ctx ends, then drains, commits and stops every part.
// It consumes nothing until the database schema is the version this binary
// embeds; the ops endpoints answer meanwhile, and readiness says why it waits.
func (w *Worker) Run(ctx context.Context) error {
	defer w.close()
	g, gctx := errgroup.WithContext(ctx)
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error {
		// The lease outlives the consumer's drain: IDs are needed until the last batch commits.
		if err := w.path.Lease.Run(leaseCtx); err != nil {
			// Only the release at the end can fail here; the lease then expires by itself.
			w.log.Warn("worker-ID lease not released; it expires after its TTL", zap.Error(err))
		}
		return nil
	})
	// The ops server, like the lease, stays up while the consumer drains, so
	// /metrics and /readyz answer until the last commit.
	httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	for _, srv := range []*httpserver.Server{w.http, w.admin, w.pprof} {
		if srv != nil {
			g.Go(func() error { return srv.Run(httpCtx) })
		}
	}
	g.Go(func() error {
		defer stopLease()
		defer stopHTTP()
		if w.schema.wait(gctx) != nil {
			return nil // stopped while waiting: nothing was consumed
		}
		// Routing by stale counts only costs a rebalance: a failed first read
		// is logged and the refresh loop tries again.
		if err := w.path.Shards.Refresh(gctx); err != nil {
			w.log.Warn("shard counts not read, routing every merchant to one shard until they are", zap.Error(err))
		}
		shardsCtx, stopShards := context.WithCancel(gctx)
		shardsDone := make(chan struct{})
		go func() {
			defer close(shardsDone)
			_ = w.path.Shards.Run(shardsCtx) // returns nil when stopped
		}()
		defer func() { stopShards(); <-shardsDone }()
		g.Go(func() error { return w.aside.Run(gctx) })
		// Stepped aside, the relay lets its lock go to a worker that can
		// write, and the periods loop writes no ledger row it cannot id.
		g.Go(func() error { return w.aside.While(gctx, w.relay.Run) })
		g.Go(func() error { return w.aside.While(gctx, w.periods.Run) })
		// Payments, grants and refunds: any failing to start stops all.
		cg, cctx := errgroup.WithContext(gctx)
		cg.Go(func() error { return w.consumer.Run(cctx) })
		cg.Go(func() error { return w.grants.Run(cctx) })
		cg.Go(func() error { return w.refunds.Run(cctx) })
		return cg.Wait() // an error is reported once, by the caller
	})
	return g.Wait()
}

func (w *Worker) close() {
	if w.path != nil {
		w.path.Close()
	}
	if w.relayWriter != nil {
		_ = w.relayWriter.Close() // nothing is buffered: every write was synchronous
	}
	w.svc.Close()
	// After the consumer: the last batch's spans are flushed too, within a bound.
	ctx, cancel := context.WithTimeout(context.Background(), tracesShutdownTimeout)
	defer cancel()
	if err := w.traces.Shutdown(ctx); err != nil {
		w.log.Warn("spans not exported at shutdown", zap.Error(err))
	}
}
