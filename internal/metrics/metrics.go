// Package metrics is what all binaries share about Prometheus; each package
// declares its own metrics next to the code that moves them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quotaflow/billing/internal/buildinfo"
)

// Namespace prefixes every metric name of the system.
const Namespace = "billing"

// NewRegistry returns a registry with the Go runtime and process collectors
// and billing_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister( // fresh collectors on a fresh registry: cannot collide
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfo(buildinfo.Get()),
	)
	return reg
}

// BuildInfo is the constant gauge billing_build_info{version,commit,go_version} = 1,
// so dashboards can tell which build each instance runs.
func BuildInfo(i buildinfo.Info) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "go_version": i.GoVersion}},
		func() float64 { return 1 })
}

// Register registers cs with reg, which may be nil (then nothing is registered
// and the collectors still work, as tests want).
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
