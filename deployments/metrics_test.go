package deployments_test

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/outbox"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/statement"
	"github.com/quotaflow/billing/internal/stepaside"
	"github.com/quotaflow/billing/internal/worker"
)

// metricSources register the collectors of each package that has metrics.
// Each gets a registry of its own: a new source is one more line.
func metricSources() map[string]func(prometheus.Registerer) error {
	return map[string]func(prometheus.Registerer) error{
		"worker":    func(r prometheus.Registerer) error { _, err := worker.NewMetrics(r); return err },
		"consumer":  func(r prometheus.Registerer) error { _, err := consumer.NewMetrics(r); return err },
		"deduct":    func(r prometheus.Registerer) error { _, err := deduct.NewMetrics(r); return err },
		"idgen":     func(r prometheus.Registerer) error { _, err := idgen.NewMetrics(r); return err },
		"ledger":    func(r prometheus.Registerer) error { _, err := ledgerdb.NewMetrics(r); return err },
		"lock":      func(r prometheus.Registerer) error { _, err := lock.NewMetrics(r); return err },
		"reconcile": func(r prometheus.Registerer) error { _, err := reconcile.NewMetrics(r); return err },
		"outbox":    func(r prometheus.Registerer) error { _, err := outbox.NewMetrics(r); return err },
		"statement": func(r prometheus.Registerer) error { _, err := statement.NewMetrics(r); return err },
		"stepaside": func(r prometheus.Registerer) error { _, err := stepaside.NewMetrics(r); return err },
	}
}

// pendingMetrics are named by the dashboard or the alerts and registered by a
// package this test cannot call yet, with the labels they will carry. The test
// fails when one of them gets registered: then drop it here.
func pendingMetrics() map[string][]string {
	return map[string][]string{
		// "billing_example_total": {"label"}, // registered by internal/example (not yet callable)
	}
}

// targetLabels are added by Prometheus to every scraped series (namespace by
// Kubernetes service discovery: a ServiceMonitor, or the usual relabelling of
// annotation scraping; absent under compose, where =~".*" still matches).
var targetLabels = []string{"instance", "job", "namespace"}

// externalMetrics are exported beside the billing programs (README: Operating
// it), with the labels the alerts use: kafka_exporter's broker-side lag and
// kube-state-metrics' CronJob series.
var externalMetrics = map[string][]string{
	"kafka_consumergroup_lag":                  {"consumergroup", "topic", "partition"},
	"kube_cronjob_status_last_successful_time": {"cronjob", "namespace"},
	"kube_cronjob_status_last_schedule_time":   {"cronjob", "namespace"},
	"kube_job_status_failed":                   {"job_name", "namespace"},
	"kube_job_status_succeeded":                {"job_name", "namespace"},
	"kube_job_status_active":                   {"job_name", "namespace"},
}

// recorder is a Registerer that remembers what each registered collector
// describes: a vector with no children yet is described, not gathered.
type recorder struct {
	reg     *prometheus.Registry
	metrics map[string][]string // exposed series name -> label names
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		name, labels := parseDesc(d)
		r.add(name, labels, kindOf(c))
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err) // the contract of MustRegister
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

func (r *recorder) add(name string, labels []string, kind dto.MetricType) {
	switch kind {
	case dto.MetricType_HISTOGRAM:
		r.metrics[name+"_bucket"] = append(slices.Clone(labels), "le")
		r.metrics[name+"_sum"] = labels
		r.metrics[name+"_count"] = labels
	case dto.MetricType_SUMMARY:
		r.metrics[name] = append(slices.Clone(labels), "quantile")
		r.metrics[name+"_sum"] = labels
		r.metrics[name+"_count"] = labels
	default:
		r.metrics[name] = labels
	}
}

var (
	descName        = regexp.MustCompile(`fqName: "([^"]*)"`)
	descConstLabels = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVarLabels   = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// parseDesc reads a Desc's name and label names from its String (the type has
// no accessors).
func parseDesc(d *prometheus.Desc) (string, []string) {
	s := d.String()
	m := descName.FindStringSubmatch(s)
	if m == nil {
		return "", nil
	}
	var labels []string
	if c := descConstLabels.FindStringSubmatch(s); c != nil && c[1] != "" {
		for _, pair := range strings.Split(c[1], ",") {
			k, _, _ := strings.Cut(pair, "=")
			labels = append(labels, k)
		}
	}
	if v := descVarLabels.FindStringSubmatch(s); v != nil && v[1] != "" {
		for _, l := range strings.Split(v[1], ",") {
			labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
		}
	}
	return m[1], labels
}

// kindOf tells histograms and summaries (which expose suffixed series) from the rest.
func kindOf(c prometheus.Collector) dto.MetricType {
	switch c.(type) {
	case *prometheus.HistogramVec:
		return dto.MetricType_HISTOGRAM
	case *prometheus.SummaryVec:
		return dto.MetricType_SUMMARY
	case prometheus.Metric: // Histogram and Summary have the same method set: ask the metric
		var m dto.Metric
		if err := c.(prometheus.Metric).Write(&m); err == nil {
			switch {
			case m.Histogram != nil:
				return dto.MetricType_HISTOGRAM
			case m.Summary != nil:
				return dto.MetricType_SUMMARY
			}
		}
	}
	return dto.MetricType_UNTYPED
}

// registeredMetrics are the series names the code exposes, with their labels.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	all := map[string][]string{}
	for name, register := range metricSources() {
		rec := &recorder{reg: prometheus.NewRegistry(), metrics: map[string][]string{}}
		if err := register(rec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		families, err := rec.reg.Gather()
		if err != nil {
			t.Fatalf("%s: gather: %v", name, err)
		}
		for _, f := range families { // collectors other than the client's own types
			if _, ok := rec.metrics[f.GetName()]; !ok && len(f.GetMetric()) > 0 {
				var labels []string
				for _, l := range f.GetMetric()[0].GetLabel() {
					labels = append(labels, l.GetName())
				}
				rec.add(f.GetName(), labels, f.GetType())
			}
		}
		if len(rec.metrics) == 0 {
			t.Fatalf("%s registered no metrics (or Desc.String changed its format)", name)
		}
		maps.Copy(all, rec.metrics)
	}
	return all
}

// query is one PromQL expression and where it is.
type query struct{ where, expr string }

// ruleFile is the Prometheus rule-file format, decoded strictly.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert         string            `json:"alert,omitempty"`
			Record        string            `json:"record,omitempty"`
			Expr          string            `json:"expr"`
			For           string            `json:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels,omitempty"`
			Annotations   map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func alertQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, f := range []string{alertsFile} {
		var rf ruleFile
		if err := yaml.UnmarshalStrict(readFile(t, f), &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				where := f + " " + r.Alert + r.Record
				if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
					t.Errorf("%s: an alert needs a severity label and a summary", where)
				}
				out = append(out, query{where, r.Expr})
			}
		}
	}
	return out
}

func dashboardQueries(t *testing.T) []query {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards in " + dashboardDir)
	}
	var out []query
	for _, f := range files {
		for _, e := range jsonStrings(decodeJSON(t, f), "expr", "query", "definition") {
			out = append(out, query{f, e})
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`billing_[a-z0-9_]+`)
	selector   = regexp.MustCompile(`(billing_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// Every metric a dashboard or an alert names is one the code registers, and
// every label it selects or groups by is one of that metric's.
func TestQueriesUseRegisteredMetrics(t *testing.T) {
	registered, pending := registeredMetrics(t), pendingMetrics()
	for name := range pending {
		if _, ok := registered[name]; ok {
			t.Errorf("%s is registered now: drop it from pendingMetrics", name)
		}
	}
	known := maps.Clone(registered)
	maps.Copy(known, pending)
	queries := append(alertQueries(t), dashboardQueries(t)...)
	used := map[string]bool{}
	for _, q := range queries {
		allowed := slices.Clone(targetLabels)
		for _, name := range metricName.FindAllString(q.expr, -1) {
			used[name] = true
			labels, ok := known[name]
			if !ok {
				t.Errorf("%s: %s is not registered by %v%s", q.where, name, slices.Sorted(maps.Keys(metricSources())), near(name, registered))
			}
			allowed = append(allowed, labels...)
		}
		for name, labels := range externalMetrics {
			if strings.Contains(q.expr, name) {
				allowed = append(allowed, labels...)
			}
		}
		for _, s := range selector.FindAllStringSubmatch(q.expr, -1) {
			for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
				if labels, ok := known[s[1]]; ok && !slices.Contains(append(labels, targetLabels...), m[1]) {
					t.Errorf("%s: %s has no label %q (labels: %v)", q.where, s[1], m[1], labels)
				}
			}
		}
		for _, g := range grouping.FindAllStringSubmatch(q.expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(allowed, l) {
					t.Errorf("%s: groups by %q, which no metric of the query carries", q.where, l)
				}
			}
		}
	}
	if len(used) == 0 {
		t.Fatal("the dashboards and alerts name no billing_ metric")
	}
	for name := range pending {
		if !used[name] {
			t.Errorf("pendingMetrics lists %s, which nothing uses", name)
		}
	}
}

// near suggests registered names sharing the first two words, for typos.
func near(name string, registered map[string][]string) string {
	parts := strings.SplitN(name, "_", 3)
	if len(parts) < 2 {
		return ""
	}
	var out []string
	for r := range registered {
		if strings.HasPrefix(r, parts[0]+"_"+parts[1]) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return "; similar: " + strings.Join(out, ", ")
}
