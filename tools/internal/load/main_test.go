package load

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workerproc"
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
		var flags []string
		if raceEnabled {
			flags = append(flags, "-race")
		}
		worker.bin, worker.err = workerproc.Build(context.Background(), testenv.GoTool(), worker.dir, flags...)
	})
	if worker.err != nil {
		t.Fatal(worker.err)
	}
	return worker.bin
}
