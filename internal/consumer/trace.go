package consumer

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/quotaflow/billing/internal/tracing"
)

// startBatch starts the span of a lane batch, a new trace linked to the
// producer span of each message that names one (a batch has many parents,
// as the messaging conventions have it). Without a Tracer it returns the
// generation's context and a span that does nothing, having read no header.
func (g *generation[T]) startBatch(l *lane[T]) (context.Context, trace.Span) {
	if g.c.cfg.Tracer == nil {
		return g.work, trace.SpanFromContext(g.work)
	}
	var links []trace.Link
	for i := range l.batch {
		if link, ok := tracing.Link(l.batch[i].msg.Headers); ok {
			links = append(links, link)
		}
	}
	return g.c.cfg.Tracer.Start(g.work, "process "+g.c.cfg.Topic, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationName(g.c.cfg.Topic), semconv.MessagingConsumerGroupName(g.c.cfg.Group),
			semconv.MessagingBatchMessageCount(len(l.batch)), attribute.Int("billing.lane", l.id)))
}

// startDLQ starts the span of a dead-letter write under the batch's span.
func (g *generation[T]) startDLQ(ctx context.Context, n int) (context.Context, trace.Span) {
	if span := trace.SpanFromContext(ctx); !span.IsRecording() {
		return ctx, span // no attributes built when nothing records them
	}
	return tracing.Start(ctx, "send "+g.c.cfg.DLQTopic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingOperationTypeSend,
			semconv.MessagingDestinationName(g.c.cfg.DLQTopic), semconv.MessagingBatchMessageCount(n)))
}
