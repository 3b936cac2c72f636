// Package buildinfo says which build is running: Version, Commit and Date are
// set at link time, for example
//
//	go build -ldflags "-X github.com/quotaflow/billing/internal/buildinfo.Version=v1.2.3 \
//	  -X github.com/quotaflow/billing/internal/buildinfo.Commit=$(git rev-parse HEAD) \
//	  -X github.com/quotaflow/billing/internal/buildinfo.Date=$(date -u +%FT%TZ)" ./cmd/...
//
// and otherwise read from the module and VCS stamps Go records in the binary.
package buildinfo

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X ...". They are variables only because the linker
// can set nothing else; read them through Get.
var (
	Version string
	Commit  string
	Date    string
)

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
}

// Get returns the linker-set values, each falling back to the binary's own
// build information ("unknown" where there is none, as under go test).
func Get() Info {
	return fill(Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version()}, debug.ReadBuildInfo)
}

func fill(i Info, read func() (*debug.BuildInfo, bool)) Info {
	var version, revision, at, modified string
	if bi, ok := read(); ok {
		version = bi.Main.Version
		if version == "(devel)" {
			version = ""
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if revision != "" && modified == "true" {
		revision += "-dirty"
	}
	i.Version = cmp.Or(i.Version, version, "devel")
	i.Commit = cmp.Or(i.Commit, revision, "unknown")
	i.Date = cmp.Or(i.Date, at, "unknown")
	return i
}

// String is the line --version prints.
func (i Info) String() string {
	return fmt.Sprintf("version %s, commit %s, built %s, %s", i.Version, i.Commit, i.Date, i.GoVersion)
}
