package config

import (
	"strings"
	"testing"
)

func TestTracing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		endpoint string // "" is off
		problems []string
	}{
		{name: "unset is off"},
		{name: "base endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			endpoint: "http://collector:4318/v1/traces"},
		{name: "base endpoint with a path", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example/otlp/"},
			endpoint: "https://c.example/otlp/v1/traces"},
		{name: "traces endpoint as is, winning", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom"}, endpoint: "http://b:4318/custom"},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "http protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, endpoint: "http://a:4318/v1/traces"},
		{name: "grpc refused, every problem at once", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_TRACES_EXPORTER": "zipkin"},
			problems: []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER"}},
		{name: "otlp without endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, problems: []string{"needs OTEL_EXPORTER_OTLP_ENDPOINT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(env(tc.env))
			if len(tc.problems) > 0 {
				if err == nil {
					t.Fatal("loaded")
				}
				for _, p := range tc.problems {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("%v\ndoes not name %s", err, p)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Tracing.Endpoint != tc.endpoint || cfg.Tracing.Enabled() != (tc.endpoint != "") {
				t.Errorf("tracing %+v, want endpoint %q", cfg.Tracing, tc.endpoint)
			}
		})
	}
}
