package worker

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/tracing"
)

// tracesShutdownTimeout bounds exporting the last spans when a worker stops:
// a collector that is down must not hold the exit.
const tracesShutdownTimeout = 5 * time.Second

const serviceName = "billing-worker"

// newTraces is the worker's tracer provider: exp when given (tests, the
// demo), else OTLP when the OTEL_* variables name an endpoint, else nil
// (off: no exporter, no tracer, nothing recorded).
func newTraces(ctx context.Context, cfg config.Tracing, exp sdktrace.SpanExporter) (*tracing.Provider, error) {
	switch {
	case exp != nil:
		return tracing.NewSync(ctx, exp, serviceName)
	case cfg.Enabled():
		return tracing.New(ctx, cfg.Endpoint, serviceName)
	default:
		return nil, nil
	}
}
