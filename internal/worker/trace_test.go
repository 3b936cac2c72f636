package worker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/tracing"
)

// One lane batch (five traced events, one untraced, one undecodable, all of
// one merchant) is one trace: a consumer span linked to the five producer
// spans, with the dead-letter write and each write-path step as its
// children, and the dead-letter record carrying the write's span context.
func TestWorkerTracesOneBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 1)
	g.env["WORKER_LATENCY_BUDGET"] = "300ms" // long enough to gather every message into one batch
	exp := tracetest.NewInMemoryExporter()
	w := g.start(1, Options{NoHTTP: true, SpanExporter: exp})
	grantAll(t, w.Worker, []string{"m-t"}, 100)

	var msgs []kafka.Message
	var producers []trace.SpanContext
	for i := range 6 {
		e := event.PaymentSucceeded{EventID: fmt.Sprintf("t-%d", i), PaymentID: fmt.Sprintf("p-%d", i), MerchantID: "m-t",
			Amount: 1, Source: event.SourcePC, OccurredAt: time.Now().UTC()}
		m := kafka.Message{Key: []byte("m-t"), Value: e.Encode()}
		if i < 5 {
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(i + 1)},
				SpanID: trace.SpanID{2, byte(i + 1)}, TraceFlags: trace.FlagsSampled, Remote: true})
			tracing.Inject(trace.ContextWithSpanContext(ctx, sc), &m)
			producers = append(producers, sc)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, kafka.Message{Key: []byte("m-t"), Value: []byte("not json")})
	g.produce(ctx, msgs)
	g.drain(ctx)

	var spans tracetest.SpanStubs
	waitUntil(t, 10*time.Second, "the batch span ended", func() bool {
		spans = exp.GetSpans()
		return slices.ContainsFunc(spans, func(s tracetest.SpanStub) bool { return s.Name == "process "+g.topic })
	})
	var batch tracetest.SpanStub
	var children []string
	for _, s := range spans {
		switch {
		case s.Name == "process "+g.topic:
			batch = s
		case s.SpanContext.TraceID() != spans[0].SpanContext.TraceID():
			t.Errorf("span %q is outside the batch's trace", s.Name)
		}
	}
	if batch.Parent.IsValid() || batch.SpanKind != trace.SpanKindConsumer {
		t.Errorf("batch span: parent %v, kind %v; want a consumer root", batch.Parent, batch.SpanKind)
	}
	var linked []trace.SpanContext
	for _, l := range batch.Links {
		linked = append(linked, l.SpanContext)
	}
	if !slices.EqualFunc(linked, producers, func(a, b trace.SpanContext) bool { return a.Equal(b) }) {
		t.Errorf("links %v, want the producer spans %v", linked, producers)
	}
	var send tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == batch.SpanContext.SpanID() {
			children = append(children, s.Name)
		}
		if s.Name == "send "+g.dlqTopic {
			send = s
		}
	}
	// The undecodable message is dead-lettered before the rest is handled.
	want := []string{"send " + g.dlqTopic, "deduct.lock", "ledger.existing_events", "deduct.lua", "ledger.commit", "deduct.settle"}
	if !slices.Equal(children, want) || len(spans) != len(want)+1 {
		t.Errorf("%d spans; children of the batch span %q, want %q", len(spans), children, want)
	}
	for _, s := range spans {
		if s.Status.Code != 0 {
			t.Errorf("span %q has status %v", s.Name, s.Status)
		}
	}

	recs := g.dlqRecords(ctx)
	if len(recs) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(recs))
	}
	link, ok := tracing.Link(recs[0].Headers)
	if !ok || !link.SpanContext.Equal(send.SpanContext.WithRemote(true)) {
		t.Errorf("dead-letter record's trace context %v (ok %v), want the write's span %v", link.SpanContext, ok, send.SpanContext)
	}
}

// Without OTEL_* variables and an exporter, the worker builds no provider
// and gives the consumer no tracer.
func TestWorkerTracingOffByDefault(t *testing.T) {
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tp, err := newTraces(context.Background(), cfg.Tracing, nil)
	if err != nil || tp != nil || tp.Tracer() != nil {
		t.Fatalf("provider %v, err %v; want none", tp, err)
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}
