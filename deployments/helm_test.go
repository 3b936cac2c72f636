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
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("helm", "billing")

// The alert rules and the dashboard live in the chart; Compose mounts them from there.
var (
	alertsFile   = filepath.Join(chartDir, "files", "alerts.yml")
	dashboardDir = filepath.Join(chartDir, "files")
)

// renderHelm is helm template of the chart with values over its defaults
// (release "billing"), schema-checked as helm install would. Values without
// secrets get real-looking passwords (the placeholders refuse to render).
func renderHelm(t *testing.T, values map[string]any) *manifests {
	t.Helper()
	return renderHelmIn(t, values, nil)
}

// withPasswords is values with the chart-made Secret's passwords given.
func withPasswords(values map[string]any) map[string]any {
	out := maps.Clone(values)
	if out == nil {
		out = map[string]any{}
	}
	if _, ok := out["secrets"]; !ok {
		out["secrets"] = map[string]any{"values": map[string]any{"mysql-password": "mysql-s3cret", "redis-password": "redis-s3cret"}}
	}
	return out
}

// renderHelmIn renders against a cluster's objects (what the chart's lookup
// finds); nil is no cluster, as helm template.
func renderHelmIn(t *testing.T, values map[string]any, cluster engine.ClientProvider) *manifests {
	t.Helper()
	files, err := helmFiles(t, values, cluster)
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

// helmFiles are the chart's rendered files: an error is a value the
// schema or a template refuses.
func helmFiles(t *testing.T, values map[string]any, cluster engine.ClientProvider) (map[string]string, error) {
	t.Helper()
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(chart, withPasswords(values),
		chartutil.ReleaseOptions{Name: "billing", Namespace: "billing", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	if cluster == nil {
		return engine.Render(chart, vals)
	}
	return engine.RenderWithClientProvider(chart, vals, cluster)
}

// helmEverything turns on every optional part of the chart.
func helmEverything() map[string]any {
	return map[string]any{
		"metrics": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true},
			"prometheusRule": map[string]any{"enabled": true},
			"dashboard":      map[string]any{"enabled": true},
		},
		"admin":      map[string]any{"enabled": true},
		"statements": map[string]any{"enabled": true, "persistentVolumeClaim": "billing-statements"},
	}
}

// renderings are the chart with every option on, its reconciler in each
// shape (a loop, a CronJob), each held against the same checks.
func renderings(t *testing.T) []*manifests {
	t.Helper()
	cron := helmEverything()
	cron["reconciler"] = map[string]any{"mode": "cronjob"}
	loop, cronjob := renderHelm(t, helmEverything()), renderHelm(t, cron)
	loop.source, cronjob.source = "helm", "helm (reconciler.mode=cronjob)"
	return []*manifests{loop, cronjob}
}

// helm lint passes, with the defaults and with every option on, without a
// warning.
func TestHelmLint(t *testing.T) {
	for name, values := range map[string]map[string]any{"defaults": nil, "everything": helmEverything()} {
		t.Run(name, func(t *testing.T) {
			res := lint.All(chartDir, withPasswords(values), "billing", false)
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
	// The alerts find workers by app_kubernetes_io_name when the job (the
	// Service's name) follows a fullnameOverride.
	if !slices.Contains(sm.Spec.PodTargetLabels, "app.kubernetes.io/name") {
		t.Errorf("ServiceMonitor/%s: podTargetLabels %v lacks app.kubernetes.io/name", sm.Name, sm.Spec.PodTargetLabels)
	}
	var want ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, alertsFile), &want); err != nil {
		t.Fatal(err)
	}
	if got := m.prometheusRules[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("the PrometheusRule's groups differ from files/alerts.yml")
	}
	if d := renderHelm(t, nil); len(d.serviceMonitors)+len(d.prometheusRules) != 0 {
		t.Error("ServiceMonitor and PrometheusRule are on by default: they fail on clusters without the Prometheus Operator")
	}
}

// values.schema.json refuses what would render a broken release.
func TestHelmValuesSchema(t *testing.T) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		values map[string]any
	}{
		{"memory limit GOMEMLIMIT cannot follow", map[string]any{"worker": map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "512M"}}}}},
		{"a password in the ConfigMap", map[string]any{"config": map[string]any{"REDIS_PASSWORD": "x"}}},
		{"a secret key named by no *_FILE variable", map[string]any{"secrets": map[string]any{"keys": map[string]any{"token": "TOKEN_FILE"}}}},
		{"a port out of range", map[string]any{"metrics": map[string]any{"port": 70000}}},
		{"a non-string config value", map[string]any{"config": map[string]any{"LOCK_TTL": 30}}},
		{"an admin port out of range", map[string]any{"admin": map[string]any{"port": 0}}},
		{"an admin rate config refuses", map[string]any{"admin": map[string]any{"rateLimit": "fast"}}},
		{"an admin rate of zero", map[string]any{"admin": map[string]any{"rateLimit": "0,5"}}},
		{"an admin burst of zero", map[string]any{"admin": map[string]any{"rateLimit": "5,0"}}},
		{"the admin port open to every pod", map[string]any{"admin": map[string]any{"from": []any{}}}},
		{"an empty admin peer", map[string]any{"admin": map[string]any{"from": []any{map[string]any{}}}}},
		{"an admin token key that is no file name", map[string]any{"admin": map[string]any{"token": map[string]any{"key": "a/b"}}}},
		{"a misspelt admin field", map[string]any{"admin": map[string]any{"enable": true}}},
		{"admin enabled as a string", map[string]any{"admin": map[string]any{"enabled": "true"}}},
		{"an unknown reconciler mode", map[string]any{"reconciler": map[string]any{"mode": "daemon"}}},
		{"a reconciler period that is no duration", map[string]any{"reconciler": map[string]any{"every": "5 minutes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := chartutil.ToRenderValues(chart, tt.values, chartutil.ReleaseOptions{Name: "billing", Namespace: "billing", IsInstall: true}, chartutil.DefaultCapabilities)
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
		})
	}
}

// With secrets.existingSecret the chart makes no Secret and every pod,
// the migration hook's included, mounts the named one.
func TestHelmExistingSecret(t *testing.T) {
	m := renderHelm(t, map[string]any{"secrets": map[string]any{"existingSecret": "vault-billing"}})
	if len(m.secrets) != 0 {
		t.Errorf("the chart made Secrets %v", slices.Collect(maps.Keys(m.secrets)))
	}
	for _, w := range m.workloads() {
		i := slices.IndexFunc(w.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil })
		if i < 0 || w.pod.Spec.Volumes[i].Secret.SecretName != "vault-billing" {
			t.Errorf("%s/%s does not mount Secret vault-billing", w.kind, w.name)
		}
	}
	for _, s := range m.statefulSets {
		if _, ok := s.Spec.Template.Annotations["checksum/secret"]; ok {
			t.Errorf("StatefulSet/%s: a checksum of a Secret the chart does not make", s.Name)
		}
	}
}

// The chart's secret keys may name exactly the *_FILE variables of secrets
// that config reads: a new secret variable appears in the schema too.
func TestHelmSecretFileVariables(t *testing.T) {
	var schema struct {
		Properties struct {
			Secrets struct {
				Properties struct {
					Keys struct {
						AdditionalProperties struct {
							Enum []string `json:"enum"`
						} `json:"additionalProperties"`
					} `json:"keys"`
				} `json:"properties"`
			} `json:"secrets"`
		} `json:"properties"`
	}
	if err := jsonRoundTrip(decodeJSON(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(schema.Properties.Secrets.Properties.Keys.AdditionalProperties.Enum))
	known := knownVariables()
	var want []string
	for name := range known {
		if base, ok := strings.CutSuffix(name, "_FILE"); ok && (known[base].Secret || strings.Contains(base, "PASSWORD")) {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json secrets.keys allows %v; config's secret files are %v", got, want)
	}
}

// A placeholder password stops the render, naming the value to set and the
// way out (a Secret you manage); so does an empty one. A key left out of
// secrets.keys is not asked for.
func TestHelmRefusesPlaceholderSecrets(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":        {"secrets": map[string]any{}},
		"redis forgotten": {"secrets": map[string]any{"values": map[string]any{"mysql-password": "mysql-s3cret"}}},
		"empty":           {"secrets": map[string]any{"values": map[string]any{"mysql-password": "", "redis-password": "redis-s3cret"}}},
	} {
		_, err := helmFiles(t, values, nil)
		if err == nil || !strings.Contains(err.Error(), "secrets.values.") || !strings.Contains(err.Error(), "secrets.existingSecret") {
			t.Errorf("%s: %v", name, err)
		}
	}
	m := renderHelm(t, map[string]any{"secrets": map[string]any{"keys": map[string]any{"redis-password": nil},
		"values": map[string]any{"mysql-password": "mysql-s3cret"}}})
	if s := m.secrets["billing-secrets"]; s == nil || len(s.StringData) != 1 || s.StringData["mysql-password"] != "mysql-s3cret" {
		t.Errorf("without the redis key: %+v", s)
	}
}
