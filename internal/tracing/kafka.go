package tracing

import (
	"context"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Headers carries trace context in a Kafka message's headers (kafka-go has
// no maintained OpenTelemetry instrumentation to do it).
type Headers []kafka.Header

var _ propagation.TextMapCarrier = (*Headers)(nil)

// Get returns the first value of key.
func (h *Headers) Get(key string) string {
	for _, x := range *h {
		if x.Key == key {
			return string(x.Value)
		}
	}
	return ""
}

// Set replaces every value of key with value: a dead-lettered copy of a
// traced message must name one parent, not two. It writes a new slice, since
// the headers may share their array with the original message's.
func (h *Headers) Set(key, value string) {
	out := make([]kafka.Header, 0, len(*h)+1)
	for _, x := range *h {
		if x.Key != key {
			out = append(out, x)
		}
	}
	*h = append(out, kafka.Header{Key: key, Value: []byte(value)})
}

// Keys lists the header keys.
func (h *Headers) Keys() []string {
	keys := make([]string, len(*h))
	for i, x := range *h {
		keys[i] = x.Key
	}
	return keys
}

// Link is a link to the producer span named by a message's traceparent
// header; ok is false when it has none or an invalid one. Messages without
// the header cost one scan of their keys.
func Link(headers []kafka.Header) (link trace.Link, ok bool) {
	hs := Headers(headers)
	if hs.Get("traceparent") == "" {
		return trace.Link{}, false
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &hs))
	return trace.Link{SpanContext: sc}, sc.IsValid()
}

// Inject writes ctx's span context (traceparent, tracestate) into m's
// headers, replacing any there.
func Inject(ctx context.Context, m *kafka.Message) {
	propagation.TraceContext{}.Inject(ctx, (*Headers)(&m.Headers))
}
