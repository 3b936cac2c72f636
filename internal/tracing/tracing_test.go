package tracing

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInjectAndLink(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled})
	orig := []kafka.Header{{Key: "traceparent", Value: []byte("00-old")}, {Key: "other", Value: []byte("x")}}
	m := kafka.Message{Headers: orig[:2:2]}
	Inject(trace.ContextWithSpanContext(context.Background(), sc), &m)
	if string(orig[0].Value) != "00-old" {
		t.Fatal("Inject wrote into the original message's headers")
	}
	hs := Headers(m.Headers)
	if n := len(m.Headers); n != 2 || hs.Get("other") != "x" {
		t.Fatalf("headers %v: want traceparent replaced and other kept", m.Headers)
	}
	link, ok := Link(m.Headers)
	if !ok || !link.SpanContext.Equal(sc.WithRemote(true)) {
		t.Fatalf("link %v (ok %v), want %v", link.SpanContext, ok, sc)
	}
	for _, h := range [][]kafka.Header{nil, {{Key: "traceparent", Value: []byte("garbage")}}} {
		if _, ok := Link(h); ok {
			t.Errorf("headers %v give a link", h)
		}
	}
}

func TestStartUnderRecordingParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p, err := NewSync(context.Background(), exp, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	ctx, root := p.Tracer().Start(context.Background(), "root")
	_, child := Start(ctx, "child")
	SetInt(child, "n", 3)
	End(child, context.Canceled)
	root.End()
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "child" || spans[0].Parent.SpanID() != root.SpanContext().SpanID() ||
		spans[0].Status.Description != context.Canceled.Error() || len(spans[0].Attributes) != 1 {
		t.Fatalf("spans %+v", spans)
	}
}

// Tracing off: no parent span, so Start, SetInt and End cost no allocation.
func TestStartWithoutParentAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		sctx, span := Start(ctx, "step")
		SetInt(span, "n", 1)
		End(span, nil)
		if sctx != ctx {
			t.Fatal("a new context")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per span with tracing off", allocs)
	}
}

func TestNilProviderIsOff(t *testing.T) {
	var p *Provider
	if p.Tracer() != nil || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider is not off")
	}
}

func TestNewExportsOverHTTPAndShutsDown(t *testing.T) {
	p, err := New(context.Background(), "http://127.0.0.1:1/v1/traces", "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "s")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_ = p.Shutdown(ctx) // nothing listens (the exporter would retry): the bound ends it
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Shutdown took %v past its 1s bound", d)
	}
}

// BenchmarkStartOff is one write-path step's tracing cost with tracing off.
func BenchmarkStartOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, "step")
		End(span, nil)
	}
}

// BenchmarkStartOn is the same step under a recording parent, exported to
// memory: what a traced batch pays per step.
func BenchmarkStartOn(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	p, err := NewSync(context.Background(), exp, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	ctx, root := p.Tracer().Start(context.Background(), "batch")
	defer root.End()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, "step")
		End(span, nil)
		exp.Reset()
	}
}
