package deployments_test

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("helm", "billing")

// renderHelm is helm template of the chart with values over its defaults
// (release "billing"), schema-checked as helm install would.
func renderHelm(t *testing.T, values map[string]any) *manifests {
	t.Helper()
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(chart, values,
		chartutil.ReleaseOptions{Name: "billing", Namespace: "billing", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	files, err := engine.Render(chart, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	m := newManifests(t, "helm")
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, ".yaml") {
			m.addAll(t, []byte(files[name]))
		}
	}
	return m
}

// helmEverything turns on every optional part of the chart.
func helmEverything() map[string]any {
	return map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
		"dashboard":      map[string]any{"enabled": true},
	}}
}

// renderings are both ways to deploy, each held against the same checks.
func renderings(t *testing.T) []*manifests {
	t.Helper()
	return []*manifests{loadManifests(t), renderHelm(t, helmEverything())}
}

// helm lint passes, with the defaults and with every option on, without a
// warning.
func TestHelmLint(t *testing.T) {
	for name, values := range map[string]map[string]any{"defaults": nil, "everything": helmEverything()} {
		t.Run(name, func(t *testing.T) {
			res := lint.All(chartDir, values, "billing", false)
			for _, msg := range res.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
		})
	}
}

// The chart's ServiceMonitor scrapes the metrics Service's port, and its
// PrometheusRule carries exactly the rule file Prometheus loads elsewhere.
func TestHelmMonitoring(t *testing.T) {
	m := renderHelm(t, helmEverything())
	if len(m.serviceMonitors) != 1 || len(m.prometheusRules) != 1 {
		t.Fatalf("%d ServiceMonitors, %d PrometheusRules, want one each", len(m.serviceMonitors), len(m.prometheusRules))
	}
	sm := m.serviceMonitors[0]
	scraped := false
	for _, svc := range m.services {
		if svc.Spec.ClusterIP == "None" || !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
			continue
		}
		for _, ep := range sm.Spec.Endpoints {
			for _, p := range svc.Spec.Ports {
				scraped = scraped || (p.Name == ep.Port && ep.Path == "/metrics")
			}
		}
	}
	if !scraped {
		t.Errorf("ServiceMonitor/%s selects no port of a non-headless Service", sm.Name)
	}
	var want ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join("prometheus", "alerts.yml")), &want); err != nil {
		t.Fatal(err)
	}
	if got := m.prometheusRules[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("the PrometheusRule's groups differ from prometheus/alerts.yml")
	}
	if d := renderHelm(t, nil); len(d.serviceMonitors)+len(d.prometheusRules) != 0 {
		t.Error("ServiceMonitor and PrometheusRule are on by default: they fail on clusters without the Prometheus Operator")
	}
}
