package metrics

import (
	"testing"

	"github.com/quotaflow/billing/internal/buildinfo"
)

func TestBuildInfo(t *testing.T) {
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := buildinfo.Get()
	want := map[string]string{"version": i.Version, "commit": i.Commit, "go_version": i.GoVersion}
	for _, mf := range mfs {
		if mf.GetName() != "billing_build_info" {
			continue
		}
		m := mf.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("billing_build_info = %v", m)
		}
		got := map[string]string{}
		for _, l := range m[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) || got["version"] != want["version"] || got["commit"] != want["commit"] || got["go_version"] != want["go_version"] {
			t.Fatalf("labels %v, want %v", got, want)
		}
		return
	}
	t.Fatal("billing_build_info not registered")
}
