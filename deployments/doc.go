// Package deployments holds no code: it is the home of the container image
// (Dockerfile), the Docker Compose system (compose.yaml), the Kubernetes base
// (k8s/), the Prometheus configuration and alerts (prometheus/) and the
// Grafana dashboard (grafana/).
//
// Its tests hold those files against the code: every manifest parses into the
// Kubernetes API types, every environment variable is one config.Load reads
// and the programs' configuration loads from it, probes and ports match the
// HTTP server, and every metric a dashboard or an alert names is registered.
package deployments
