package deployments_test

import (
	"encoding/json"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// imageRepo is the repository of the one image all four programs ship in.
const imageRepo = "quotaflow/billing"

// repoPath is a path relative to the repository root (the tests run in deployments/).
func repoPath(elem ...string) string { return filepath.Join(append([]string{".."}, elem...)...) }

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// modules are the directories of the modules whose cmd/ holds programs of
// the image: the root's, and tools/ (billing-sim).
var modules = []string{".", "tools"}

// programs are the main packages under cmd/ of each module (a directory with a
// non-test .go file), by name: the directory of the module that builds it.
func programs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, module := range modules {
		dirs, err := os.ReadDir(repoPath(module, "cmd"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			files, _ := filepath.Glob(repoPath(module, "cmd", d.Name(), "*.go"))
			if slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }) {
				out[d.Name()] = module
			}
		}
	}
	return out
}

// knownVariables are the variables config.Load reads, by name.
func knownVariables() map[string]config.Variable {
	out := map[string]config.Variable{}
	for _, v := range config.Variables() {
		out[v.Name] = v
	}
	return out
}

// runtimeVariables are read by the Go runtime, not by config.
var runtimeVariables = []string{"GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"}

// unit is one program as a manifest runs it: its argv and its environment.
type unit struct {
	where   string            // the manifest and the object, for messages
	command []string          // argv; command[0] is a path inside the image
	env     map[string]string // what the process sees
}

func (u unit) program() string { return path.Base(u.command[0]) }

// needs is what the program requires beyond the defaults (mirrors the mains).
func (u unit) needs() []config.Need {
	switch {
	case u.program() == "billing-worker":
		return []config.Need{config.NeedKafka, config.NeedWorkerID}
	case u.program() == "billingctl" && len(u.command) > 1 && u.command[1] == "dlq":
		return []config.Need{config.NeedKafka}
	}
	return nil
}

// checkUnit holds a deployed program against the code: the program exists and
// is where the image puts it, every variable is one config reads, the
// configuration loads, and nothing falls back to a loopback default (wrong in
// a container). Every variable of config.Variables() is then either set,
// defaulted, or optional for this program: config.Load with the program's
// needs (KAFKA_BROKERS and a worker ID for billing-worker) is the judge.
func checkUnit(t *testing.T, u unit, img image) config.Config {
	t.Helper()
	if len(u.command) == 0 {
		t.Errorf("%s: no command", u.where)
		return config.Config{}
	}
	if programs(t)[u.program()] == "" {
		t.Errorf("%s: runs %q, which is no program under cmd/ or tools/cmd/", u.where, u.command[0])
	}
	if want := path.Join(img.binDir, u.program()); u.command[0] != want {
		t.Errorf("%s: runs %q, the image has it at %q", u.where, u.command[0], want)
	}
	known := knownVariables()
	for name := range u.env {
		if _, ok := known[name]; !ok && !slices.Contains(runtimeVariables, name) {
			t.Errorf("%s: sets %s, which config.Load does not read (typo?)", u.where, name)
		}
	}
	for _, v := range config.Variables() {
		if strings.Contains(v.Default, "127.0.0.1") && u.env[v.Name] == "" {
			t.Errorf("%s: %s is unset; its default %q points at the container itself", u.where, v.Name, v.Default)
		}
	}
	for _, need := range u.needs() {
		if need == config.NeedKafka && u.env["KAFKA_BROKERS"] == "" {
			t.Errorf("%s: %s requires KAFKA_BROKERS (it has no default)", u.where, u.program())
		}
	}
	cfg, err := config.Load(func(k string) string { return u.env[k] }, u.needs()...)
	if err != nil {
		t.Errorf("%s: the configuration does not load:\n%v", u.where, err)
	}
	return cfg
}

// loadUnit is the configuration a unit's program gets (checkUnit reports the problems).
func loadUnit(t *testing.T, u unit) config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return u.env[k] }, u.needs()...)
	if err != nil {
		t.Fatalf("%s: the configuration does not load:\n%v", u.where, err)
	}
	return cfg
}

// httpPort is the port of the operational HTTP server of cfg.
func httpPort(t *testing.T, cfg config.Config) int {
	t.Helper()
	_, p, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		t.Fatalf("HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("HTTP_ADDR %q: %v", cfg.HTTPAddr, err)
	}
	return n
}

// The default port is what the manifests use when they leave HTTP_ADDR alone.
func TestDefaultHTTPPort(t *testing.T) {
	if got := httpPort(t, config.Config{HTTPAddr: config.DefaultHTTPAddr}); got != 9100 {
		t.Errorf("config.DefaultHTTPAddr port %d; the manifests, the Dockerfile's EXPOSE and the README say 9100", got)
	}
}

// jsonStrings walks a decoded JSON document and returns the strings under the given keys.
func jsonStrings(doc any, keys ...string) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && slices.Contains(keys, k) {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// jsonRoundTrip decodes a generic JSON document into a typed value.
func jsonRoundTrip(doc, into any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

func decodeJSON(t *testing.T, name string) any {
	t.Helper()
	var doc any
	if err := json.Unmarshal(readFile(t, name), &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

var goDirective = regexp.MustCompile(`(?m)^go (\d+\.\d+)`)

// goMinor is the Go version of go.mod, major.minor.
func goMinor(t *testing.T) string {
	t.Helper()
	m := goDirective.FindSubmatch(readFile(t, repoPath("go.mod")))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}
