package deployments_test

import (
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// bornSeries are the counter series the code exposes before anything
// happened: name -> the label sets present at 0.
func bornSeries(t *testing.T) map[string][]map[string]string {
	t.Helper()
	out := map[string][]map[string]string{}
	for name, register := range metricSources() {
		reg := prometheus.NewRegistry()
		if err := register(reg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetType() != dto.MetricType_COUNTER {
				continue
			}
			for _, m := range f.GetMetric() {
				ls := map[string]string{}
				for _, l := range m.GetLabel() {
					ls[l.GetName()] = l.GetValue()
				}
				out[f.GetName()] = append(out[f.GetName()], ls)
			}
		}
	}
	return out
}

var literalAlternatives = regexp.MustCompile(`^[a-z0-9_]+(\|[a-z0-9_]+)*$`)

// Every counter label value an alert matches (kind="x", kind=~"x|y") exists
// at 0 from the start: a counter born at 1 by its first increment is missed
// by increase() and rate(), so the first failure would never page.
func TestAlertedCountersAreBornAtZero(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", alertsFile, errs)
	}
	born, registered := bornSeries(t), registeredMetrics(t)
	checked := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok || !strings.HasSuffix(vs.Name, "_total") {
					return nil
				}
				if _, ok := registered[vs.Name]; !ok {
					return nil // TestQueriesUseRegisteredMetrics judges the name
				}
				series := born[vs.Name]
				for _, m := range vs.LabelMatchers {
					if m.Name == labels.MetricName || slices.Contains(targetLabels, m.Name) {
						continue
					}
					var values []string
					switch {
					case m.Type == labels.MatchEqual:
						values = []string{m.Value}
					case m.Type == labels.MatchRegexp && literalAlternatives.MatchString(m.Value):
						values = strings.Split(m.Value, "|")
					}
					for _, v := range values {
						checked++
						if !slices.ContainsFunc(series, func(ls map[string]string) bool { return ls[m.Name] == v }) {
							t.Errorf("%s: %s{%s=%q} is not exposed at 0 before its first increment", r.Alert, vs.Name, m.Name, v)
						}
					}
				}
				return nil
			})
		}
	}
	if checked == 0 {
		t.Fatal("no alert matches a counter's label value")
	}
}

// criticalKind is a finding kind reconcile marks critical (finding.go).
var criticalKind = regexp.MustCompile(`(?m)^\s*Kind\w+\s+Kind = "(\w+)"\s*//.*\(critical\)`)

// Every critical finding kind (never repaired, left for a person) is matched
// by a critical alert, so it pages wherever the reconciler's metrics reach.
func TestCriticalFindingsPage(t *testing.T) {
	kinds := criticalKind.FindAllStringSubmatch(string(readFile(t, repoPath("internal", "reconcile", "finding.go"))), -1)
	if len(kinds) == 0 {
		t.Fatal("no critical kind in internal/reconcile/finding.go")
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", alertsFile, errs)
	}
	for _, k := range kinds {
		paged := false
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				expr, err := p.ParseExpr(r.Expr)
				if err != nil || r.Labels["severity"] != "critical" {
					continue
				}
				parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok && vs.Name == "billing_reconcile_findings_total" {
						for _, m := range vs.LabelMatchers {
							paged = paged || (m.Name == "kind" && m.Matches(k[1]))
						}
					}
					return nil
				})
			}
		}
		if !paged {
			t.Errorf("no critical alert matches billing_reconcile_findings_total{kind=%q}", k[1])
		}
	}
}
