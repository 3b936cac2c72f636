package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Start starts a child of ctx's span when that span records, from the
// parent's own provider (nothing global). Otherwise it returns ctx and the
// parent unchanged: no allocation, and End on it does nothing.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, name, opts...)
}

// End ends span, recording err as its status when there is one.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SetInt sets an integer attribute when span records (built only then).
func SetInt(span trace.Span, key string, n int) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int(key, n))
	}
}
