// Package faults is the fault-injection suite of the billing worker: each test
// runs workers (real billing-worker processes built from cmd/billing-worker,
// or worker.New in the test process) on services of the test's own, breaks
// something at seeded random moments, and then proves with the invariant
// checker that no event was lost, none applied twice, no merchant overdrawn,
// every poison message dead-lettered (once by provenance; copies allowed) and
// no valid one, and Redis equal to MySQL: first before any repair (only
// merchants a scenario corrupted by hand exempt), then after one reconciler
// pass.
//
// The faults: worker processes killed with SIGKILL and restarted, or stopped
// with SIGSTOP past the lock TTL or while its locks change hands (its next
// fenced script must be refused); Redis restarted with its data lost, or down
// longer than the lock TTL; MariaDB killed and restarted; broker error storms
// and forced rebalances through kfake's control hooks; duplicated, reordered
// and rewound delivery; a worker-ID lease taken away, so that its worker
// steps aside; and the whole write path on a Redis Cluster. A churn
// test kills one of three workers every few seconds and bounds the duplicates
// each kill causes; a soak test watches the workers' memory and goroutines.
//
// Every scenario counts its faults against a floor per kind, fails when one
// came after its load ended, and records its schedule (each fault's kind,
// worker, ledger rows and produced messages when it fired); a failed one
// writes it to a file its log names, and -faults.replay=FILE fires the faults
// at those counts with the same seed. Sizes are small by default (the
// package runs in CI in a few minutes); -faults.long runs the full lengths
// and -soak=10m a long soak.
//
// Destructive tests start their own redis-server and mariadbd: the shared
// services are never stopped. The package holds no production code.
package faults

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workerproc"
)

var (
	seedFlag = flag.Uint64("faults.seed", 0, "replay every scenario with this seed (0: a fresh random seed per scenario)")
	longFlag = flag.Bool("faults.long", false, "run the full-length scenarios (minutes) instead of the CI sizes")
	soakFlag = flag.Duration("soak", 15*time.Second, "how long TestSoak runs; 0 skips it")
	// unfencedFlag builds the workers with the unfenced tag, without the token
	// check of the named scripts: TestUnfencedScriptsFailThePausedWorker's
	// mutant runs.
	unfencedFlag = flag.String("faults.unfenced", "", "build the workers without the token check of these fenced scripts, comma-separated (deduct,settle,drop,hydrate; the suite must then fail)")
)

// workerBinary is cmd/billing-worker, built once by TestMain.
var workerBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "billing-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := buildWorker(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	workerBinary = bin
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// buildWorker builds the real billing-worker binary (without -race: three of
// them under the race detector would not fit on a small CI machine).
func buildWorker(dir string) (string, error) {
	var flags []string
	if *unfencedFlag != "" {
		flags = unfencedArgs(*unfencedFlag)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	bin, err := workerproc.Build(ctx, testenv.GoTool(), dir, flags...)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "faults: built billing-worker in %v\n", time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// unfencedArgs are the go build flags that strip the token check of scripts
// (comma-separated).
func unfencedArgs(scripts string) []string {
	return []string{"-tags", "unfenced", "-ldflags", "-X github.com/quotaflow/billing/internal/quota.unfenced=" + scripts}
}

// size picks the CI size or, with -faults.long, the full one.
func size[T any](ci, long T) T {
	if *longFlag {
		return long
	}
	return ci
}

// between returns a random duration in [lo, hi).
func between(rng *mrand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
