// Package mutant measures the package tests' power over bugs that once passed
// them all: each mutant is a small edit of one source file, compiled in with
// go test -overlay (the tree is never written), and the test named to catch it
// must fail with its message. A mutant whose code is not found exactly once
// fails the check: re-target it after a refactor, never drop it. The package
// holds no production code; the build-tag mutants of the fenced scripts are
// in package faults.
package mutant

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// root is the module's directory, from this package's.
const root = "../.."

// mutants are the bugs; old is replaced by new in file (relative to root).
var mutants = []struct {
	name, file, old, new string
	pkg, test, want      string
}{
	{
		// A sharded merchant's events all land in one shard, and one whose
		// pending deduction a rebalance moved to its event's shard is
		// deducted again in the merchant's.
		name: "route by merchant", file: "internal/deduct/apply.go",
		old: "shard.Of(ev.EventID, n), n), n", new: "shard.Of(ev.MerchantID, n), n), n",
		pkg: "./internal/deduct", test: "TestRedeliveryFindsItsPendingInItsShard", want: "the redelivery deducted again",
	},
	{
		// next_expiry holds the latest expiry: debits pass the guard past
		// the earlier one's, and it is recorded late.
		name: "latest expiry", file: "internal/ledger/burn.go",
		old: "g.ExpiresAt.Before(*nextExpiry)", new: "g.ExpiresAt.After(*nextExpiry)",
		pkg: "./internal/ledger/ledgerdb", test: "TestGuardWaitsForTheEarliestExpiry", want: "want the guard to wait for it",
	},
	{
		// The part of a balance below its floor is dropped when spread
		// over shards: they read 0 where MySQL says -80.
		name: "debt below the floor dropped", file: "internal/quota/script.go",
		old: "remains[0] += remain + f", new: "",
		pkg: "./internal/deduct", test: "TestShardsCarryADebtBelowTheFloor", want: "MySQL has -80, want all -80",
	},
}

func TestMutantsFailTheirPackageTests(t *testing.T) {
	t.Parallel()
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			overlay := mutate(t, m.file, m.old, m.new)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, testenv.GoTool(), "test", "-count=1", "-v", "-overlay="+overlay, "-run=^"+m.test+"$", m.pkg)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if strings.Contains(string(out), "--- SKIP: "+m.test) {
				t.Skipf("%s skipped, so it cannot judge the mutant (set %s=1 to fail instead):\n%s", m.test, testenv.RequireEnv, out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), m.want) {
				t.Fatalf("with the mutant %q, %s passed or failed otherwise (%v), want %q:\n%s", m.name, m.test, err, m.want, out)
			}
			for line := range strings.Lines(string(out)) {
				if strings.Contains(line, m.want) {
					t.Logf("%s caught %q: %s", m.test, m.name, strings.TrimSpace(line))
				}
			}
		})
	}
}

// mutate writes file with old replaced by new to a temporary directory and
// returns the path of an overlay that puts it in the file's place.
func mutate(t *testing.T, file, old, new string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once: the code moved, re-target the mutant", file, old, n)
	}
	dir := t.TempDir()
	mutated := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {path: mutated}})
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(name, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}
