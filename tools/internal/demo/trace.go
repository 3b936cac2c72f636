package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// keptTraces bounds what --trace holds: a few batches suffice to pick one.
const keptTraces = 64

// spanRecorder is the workers' span exporter under --trace: it keeps the
// spans of the first keptTraces traces, and outlives the workers' Shutdown
// (unlike tracetest's exporter, which forgets on Shutdown).
type spanRecorder struct {
	mu      sync.Mutex
	byTrace map[trace.TraceID][]sdktrace.ReadOnlySpan
}

func newSpanRecorder() *spanRecorder {
	return &spanRecorder{byTrace: make(map[trace.TraceID][]sdktrace.ReadOnlySpan)}
}

func (r *spanRecorder) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range spans {
		id := s.SpanContext().TraceID()
		if _, ok := r.byTrace[id]; ok || len(r.byTrace) < keptTraces {
			r.byTrace[id] = append(r.byTrace[id], s)
		}
	}
	return nil
}

func (r *spanRecorder) Shutdown(context.Context) error { return nil }

// pick is the most telling kept batch: one that dead-lettered, else the
// one with the most spans (redos show as repeated steps).
func (r *spanRecorder) pick() []sdktrace.ReadOnlySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best []sdktrace.ReadOnlySpan
	score := func(spans []sdktrace.ReadOnlySpan) int {
		n := len(spans)
		if slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return strings.HasPrefix(s.Name(), "send ") }) {
			n += 1000
		}
		return n
	}
	for _, spans := range r.byTrace {
		if !slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return !s.Parent().IsValid() }) {
			continue // its root has not ended yet
		}
		if best == nil || score(spans) > score(best) {
			best = spans
		}
	}
	return best
}

// printTrace writes one batch's span tree, children in start order.
func printTrace(w io.Writer, spans []sdktrace.ReadOnlySpan) {
	if len(spans) == 0 {
		fmt.Fprintln(w, "trace: no finished batch was recorded")
		return
	}
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	children := make(map[trace.SpanID][]sdktrace.ReadOnlySpan)
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().IsValid() {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	fmt.Fprintf(w, "trace %s (one lane batch)\n", spans[0].SpanContext().TraceID())
	var walk func(s sdktrace.ReadOnlySpan, indent string)
	walk = func(s sdktrace.ReadOnlySpan, indent string) {
		var extra []string
		for _, a := range s.Attributes() {
			extra = append(extra, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		if n := len(s.Links()); n > 0 {
			extra = append(extra, fmt.Sprintf("links=%d", n))
		}
		if s.Status().Code != 0 {
			extra = append(extra, "error="+s.Status().Description)
		}
		fmt.Fprintf(w, "  %-40s %9s  %s\n", indent+s.Name(), s.EndTime().Sub(s.StartTime()).Round(time.Microsecond), strings.Join(extra, " "))
		for _, c := range children[s.SpanContext().SpanID()] {
			walk(c, indent+"  ")
		}
	}
	for _, s := range roots {
		walk(s, "")
	}
}
