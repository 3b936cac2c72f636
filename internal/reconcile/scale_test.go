package reconcile

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/idgen"
)

var (
	scaleMerchants = flag.Int("scale.merchants", 2000, "merchants seeded by TestScale")
	scaleRows      = flag.Int("scale.rows", 100_000, "ledger rows seeded by TestScale")
	scaleDrift     = flag.Int("scale.drift", 50, "merchants of TestScale given Redis drift")
)

// TestScale seeds merchants and ledger rows with multi-row INSERTs and times a
// full run (no checkpoints: every ledger row is summed) and an incremental
// one. CI runs the small default; the size is
//
//	go test ./internal/reconcile -run TestScale -v -timeout 2h -scale.merchants=100000 -scale.rows=10000000
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a ledger: not in -short")
	}
	e := newEnv(t)
	merchants, rows := *scaleMerchants, *scaleRows
	if rows < merchants {
		t.Fatalf("-scale.rows %d must be at least -scale.merchants %d (one credit row each)", rows, merchants)
	}
	start := time.Now()
	truth := seedLedger(t, e, merchants, rows)
	seeded := time.Since(start)
	start = time.Now()
	seedQuotas(t, e, truth, *scaleDrift)
	t.Logf("seeded %d merchants, %d ledger rows in %s (%.0f rows/s); %d quota hashes in %s",
		merchants, rows, seeded.Round(time.Millisecond), float64(rows)/seeded.Seconds(), merchants, time.Since(start).Round(time.Millisecond))

	r, reg := e.reconciler(Config{Logger: zap.NewNop(), Concurrency: 4})
	var ledgerBefore float64
	for i, name := range []string{"full (no checkpoints)", "incremental"} {
		rep := mustRun(t, r)
		took := rep.FinishedAt.Sub(rep.StartedAt)
		ledger := histSum(t, reg, "billing_reconcile_ledger_page_seconds")
		t.Logf("%s run: %s, %.0f merchants/s (ledger audit %.1fs of page time), status %s, checked %d, drifted %d, repaired %d, busy %d",
			name, took.Round(time.Millisecond), float64(merchants)/took.Seconds(), ledger-ledgerBefore, rep.Status, rep.Checked, rep.Drifted, rep.Repaired, rep.Busy)
		ledgerBefore = ledger
		wantDrift := int64(min(*scaleDrift, merchants))
		if i > 0 {
			wantDrift = 0
		}
		if rep.Checked+rep.Busy != int64(merchants) || rep.Drifted != wantDrift || rep.Repaired != wantDrift || rep.LedgerAudited != int64(merchants) {
			t.Fatalf("%s run: %+v", name, rep)
		}
	}
}

func scaleMerchant(i int) string { return fmt.Sprintf("m-%07d", i) }

// seedLedger inserts the merchants' balance rows and rows ledger rows: one
// credit per merchant, then debits round-robin. It returns remain per merchant.
func seedLedger(t *testing.T, e *env, merchants, rows int) []int64 {
	t.Helper()
	credited := make([]int64, merchants)
	debited := make([]int64, merchants)
	for i := range rows {
		m := i % merchants
		if i < merchants {
			credited[m] += 1_000_000
		} else {
			debited[m] += int64(1 + i%7)
		}
	}
	const batch = 2000
	base := (time.Now().Add(-2*time.Hour).UnixMilli() - idgen.EpochUnixMilli) << (idgen.WorkerBits + idgen.SequenceBits)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(4)
	for lo := 0; lo < rows; lo += batch {
		hi := min(lo+batch, rows)
		g.Go(func() error {
			var sb strings.Builder
			sb.WriteString("INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, occurred_at, seq) VALUES ")
			for i := lo; i < hi; i++ {
				kind, amount := "debit", int64(1+i%7)
				if i < merchants {
					kind, amount = "credit", 1_000_000
				}
				if i > lo {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "(%d,'evt-%d','%s','%s',%d,NOW(6),%d)", base+int64(i), i, scaleMerchant(i%merchants), kind, amount, i/merchants+1)
			}
			_, err := e.my.SQL.ExecContext(ctx, sb.String())
			return err
		})
	}
	for lo := 0; lo < merchants; lo += batch {
		hi := min(lo+batch, merchants)
		g.Go(func() error {
			var sb strings.Builder
			sb.WriteString("INSERT INTO merchant_balance (merchant_id, credited, debited, seq) VALUES ")
			for i := lo; i < hi; i++ {
				if i > lo {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "('%s',%d,%d,%d)", scaleMerchant(i), credited[i], debited[i], (rows-i+merchants-1)/merchants)
			}
			_, err := e.my.SQL.ExecContext(ctx, sb.String())
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	remain := make([]int64, merchants)
	for i := range remain {
		remain[i] = credited[i] - debited[i]
	}
	return remain
}

// seedQuotas writes every merchant's quota hash, drift merchants one unit high.
func seedQuotas(t *testing.T, e *env, remain []int64, drift int) {
	t.Helper()
	pipe := e.redis.Client.Pipeline()
	for i, v := range remain {
		if i < drift {
			v++
		}
		pipe.HSet(e.ctx, e.redis.Keys.Quota(scaleMerchant(i)), "remain", v, "ver", 1)
		if pipe.Len() == 5000 || i == len(remain)-1 {
			if _, err := pipe.Exec(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
