// Package deployments holds no code: it is the home of the container image
// (Dockerfile), the Docker Compose system (compose.yaml), the Helm chart
// (helm/billing, the one source of the Kubernetes manifests, with the alert
// rules and the Grafana dashboard in its files/) and the Prometheus and
// Grafana configuration of Compose.
//
// Its tests hold those files against the code: the chart, rendered as helm
// template does and linted, parses into the Kubernetes API types, every
// environment variable is one config.Load reads and the programs'
// configuration loads from it, probes and ports match the HTTP server,
// migrations finish before a worker starts, and every metric a dashboard or
// an alert names is registered. Every alert is evaluated against synthetic
// series: it fires when it should, and not otherwise.
//
// It is a module of its own: Helm, Kubernetes and the Prometheus rule engine
// are dependencies of these tests only, not of the programs.
package deployments
