// Package tracing builds the OpenTelemetry tracer provider from the standard
// OTEL_* variables, carries W3C trace context in Kafka headers, and starts
// child spans only under a recording parent, so that tracing turned off
// costs the write path nothing.
package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of every span of this module.
const scope = "github.com/quotaflow/billing"

// Provider owns a tracer provider and its exporter. A nil *Provider is
// tracing turned off: Tracer returns nil and Shutdown does nothing.
type Provider struct {
	sdk *sdktrace.TracerProvider
}

// New exports spans over OTLP/HTTP to endpoint (the full traces URL), in
// batches. The exporter reads its other OTEL_EXPORTER_OTLP_* variables, the
// SDK its sampler, batch and limit variables, and the resource
// OTEL_SERVICE_NAME (else service) and OTEL_RESOURCE_ATTRIBUTES.
func New(ctx context.Context, endpoint, service string) (*Provider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := newResource(ctx, service)
	if err != nil {
		return nil, err
	}
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// NewSync hands every span to exp as it ends and samples all: tests and the
// demo read an in-memory exporter right after a batch.
func NewSync(ctx context.Context, exp sdktrace.SpanExporter, service string) (*Provider, error) {
	res, err := newResource(ctx, service)
	if err != nil {
		return nil, err
	}
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))}, nil
}

func newResource(ctx context.Context, service string) (*resource.Resource, error) {
	// Later detectors win: the environment overrides the program's name.
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

// Tracer is the module's tracer, or nil when p is nil (tracing off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.sdk.Tracer(scope)
}

// Shutdown exports what is buffered and stops the exporter, within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
