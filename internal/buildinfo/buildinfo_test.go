package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFill(t *testing.T) {
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	devel := func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true }
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	cases := []struct {
		name string
		set  Info
		read func() (*debug.BuildInfo, bool)
		want Info
	}{
		{"linker wins", Info{Version: "v2", Commit: "fff", Date: "2026-12-02"}, stamped, Info{Version: "v2", Commit: "fff", Date: "2026-12-02"}},
		{"binary stamps", Info{}, stamped, Info{Version: "v1.4.0", Commit: "abc123-dirty", Date: "2026-12-01T10:00:00Z"}},
		{"devel build", Info{}, devel, Info{Version: "devel", Commit: "unknown", Date: "unknown"}},
		{"no build info", Info{Commit: "fff"}, none, Info{Version: "devel", Commit: "fff", Date: "unknown"}},
	}
	for _, c := range cases {
		if got := fill(c.set, c.read); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestGetHasGoVersion(t *testing.T) {
	if i := Get(); i.GoVersion == "" || i.Version == "" || i.Commit == "" {
		t.Fatalf("Get() = %+v", i)
	}
}
