package deployments_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A dashboard works in any Grafana and any namespace: its data source is a
// variable (no uid of one installation), and every panel query filters on
// the namespace and instance variables.
func TestDashboardVariables(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards")
	}
	for _, f := range files {
		var d struct {
			Templating struct {
				List []struct{ Name, Type string } `json:"list"`
			} `json:"templating"`
			Panels []any `json:"panels"`
		}
		doc := decodeJSON(t, f)
		if err := jsonRoundTrip(doc, &d); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range d.Templating.List {
			names = append(names, v.Name)
			if v.Name == "datasource" && v.Type != "datasource" {
				t.Errorf("%s: variable datasource is a %s, want a datasource variable", f, v.Type)
			}
		}
		for _, want := range []string{"datasource", "namespace", "instance"} {
			if !slices.Contains(names, want) {
				t.Errorf("%s: no %s variable (has %v)", f, want, names)
			}
		}
		for _, uid := range jsonStrings(d.Panels, "uid") {
			if uid != "${datasource}" {
				t.Errorf("%s: a panel names data source uid %q; use ${datasource}", f, uid)
			}
		}
		for _, expr := range jsonStrings(d.Panels, "expr") {
			for _, s := range selector.FindAllStringSubmatch(expr, -1) {
				if !strings.Contains(s[2], `namespace=~"$namespace"`) || !strings.Contains(s[2], `instance=~"$instance"`) {
					t.Errorf("%s: %s in %q does not filter on $namespace and $instance", f, s[1], expr)
				}
			}
			if metricName.MatchString(expr) && !selector.MatchString(expr) {
				t.Errorf("%s: %q selects without the $namespace and $instance filters", f, expr)
			}
		}
	}
}
