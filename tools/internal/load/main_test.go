package load

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if worker.dir != "" {
		os.RemoveAll(worker.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// worker is cmd/billing-worker, built once for the package's tests.
var worker struct {
	once     sync.Once
	dir, bin string
	err      error
}

// workerBinary builds cmd/billing-worker once, as the test binary was built
// (with -race under -race, from the same cached objects).
func workerBinary(t *testing.T) string {
	t.Helper()
	worker.once.Do(func() {
		if worker.dir, worker.err = os.MkdirTemp("", "load-worker-"); worker.err != nil {
			return
		}
		worker.bin = filepath.Join(worker.dir, "billing-worker")
		args := []string{"build", "-o", worker.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/quotaflow/billing/cmd/billing-worker")...).CombinedOutput()
		if err != nil {
			worker.err = fmt.Errorf("go build billing-worker: %w\n%s", err, out)
		}
	})
	if worker.err != nil {
		t.Fatal(worker.err)
	}
	return worker.bin
}
