package config

import (
	"net/url"
	"strings"
)

// Tracing is the part of the standard OTEL_* variables that decides whether
// traces are exported and where. The OTLP exporter and the SDK read the rest
// themselves (headers, timeout, compression, sampler, resource attributes).
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL; empty when tracing is off.
	Endpoint string
}

// Enabled reports whether spans are recorded and exported.
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

// tracing is off unless an OTLP endpoint is named: an unset environment costs nothing.
func (p *parser) tracing() Tracing {
	disabled := p.boolean("OTEL_SDK_DISABLED", false)
	exporter := p.oneOf("OTEL_TRACES_EXPORTER", "", "otlp", "none")
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := p.get(name); v != "" && v != "http/protobuf" {
			p.fail(name, v, "is not supported: traces are sent as http/protobuf")
		}
	}
	endpoint := p.otlpURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if base := p.otlpURL("OTEL_EXPORTER_OTLP_ENDPOINT", "/v1/traces"); endpoint == "" {
		endpoint = base
	}
	if exporter == "otlp" && endpoint == "" {
		p.fail("OTEL_TRACES_EXPORTER", exporter, "needs OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	if disabled || exporter == "none" {
		return Tracing{}
	}
	return Tracing{Endpoint: endpoint}
}

// otlpURL reads an http(s) URL and appends signalPath (the base endpoint's
// rule in the OTLP exporter specification).
func (p *parser) otlpURL(name, signalPath string) string {
	v := p.get(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(name, v, "is not an http(s) URL")
		return ""
	}
	if signalPath != "" {
		u.Path = strings.TrimSuffix(u.Path, "/") + signalPath
	}
	return u.String()
}
