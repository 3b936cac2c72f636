package statement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/sqltx"
)

// The default settle time outlasts the longest a row's commit can follow
// its created_at: Commit's guard rounds, each of deadlock retries, each
// attempt bounded by MaxTxAge.
func TestDefaultSettleOutlastsCommit(t *testing.T) {
	if longest := sqltx.Attempts * sqltx.Attempts * ledgerdb.MaxTxAge; DefaultSettle <= longest {
		t.Fatalf("DefaultSettle %v, a commit can land %v after its rows' created_at", DefaultSettle, longest)
	}
}

// A job lock lost after the last row, while the file syncs, leaves no file:
// commit looks at the lock's context just before the rename.
func TestOutputCommitAfterLoss(t *testing.T) {
	dir := t.TempDir()
	out, err := create(Options{Out: filepath.Join(dir, "s.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(out.w, "{}"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: taken", lock.ErrLost))
	if err := out.commit(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("commit after the loss: %v, want lock.ErrLost", err)
	}
	out.abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
