package consumer

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pm := m.partition(3)
	pm.consumed.Inc()
	pm.lag.Set(7)
	pm.inflight.Set(2)
	m.batchSize.Observe(4)
	m.batchDuration.Observe(0.01)
	m.generations.Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{
		"billing_consumer_messages_total", "billing_dlq_published_total", "billing_retries_total",
		"billing_batch_size", "billing_batch_duration_seconds", "billing_consumer_lag", "billing_inflight",
		"billing_consumer_commits_total", "billing_consumer_generations_total",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("%s not registered (have %v)", want, names)
		}
	}
	m.forget(3)
	if got := value(t, m.lag); got != 0 {
		t.Errorf("lag after forget = %v", got)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
}
