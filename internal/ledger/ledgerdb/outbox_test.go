package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// outboxIDs lists the outbox rows' ids in seq order.
func outboxIDs(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	if err := s.query(t.Context(), s.db, "SELECT id FROM quota_outbox ORDER BY seq", nil, func(rows *sql.Rows) error {
		var id string
		err := rows.Scan(&id)
		ids = append(ids, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A merchant's own thresholds (stored in MySQL) win over the default; one
// batch that crosses two thresholds and depletes reports each once, in
// order; per-payment events come before the crossings of their row; a
// rejected batch and a replayed one write nothing.
func TestCommitWritesBalanceEvents(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	s.opts.Events = Events{PerPayment: true, DefaultAlerts: quotaevent.Alerts{Units: 900}}
	written := 0
	s.opts.Events.Written = func() { written++ }
	if _, err := grantOne(s, "m-1", 1000, "g-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlerts(ctx, "m-1", &quotaevent.Alerts{Units: 500, Percent: 20}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlerts(ctx, "m-x", nil); !errors.Is(err, ledger.ErrUnknownMerchant) {
		t.Fatalf("SetAlerts of an unknown merchant: %v", err)
	}
	batch := []ledger.Row{debit("e-1", "m-1", 100), debit("e-2", "m-1", 700), rejected("e-3", "m-1", 500, ledger.ReasonInsufficient), debit("e-4", "m-1", 200)}
	if err := s.Commit(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// 1000 -> 900 -> 200 (below 500; 200 is not below 200) -> rejected -> 0.
	want := []string{"g-1/quota.granted", "e-1/quota.deducted", "e-2/quota.deducted", "e-2/quota.low/500",
		"e-3/quota.rejected", "e-4/quota.deducted", "e-4/quota.low/200", "e-4/quota.depleted/0"}
	if got := outboxIDs(t, s); fmtList(got) != fmtList(want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	if written != 2 {
		t.Errorf("Written ran %d times, want 2 (the grant, the batch)", written)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e-1", "m-1", 100)}); !errors.Is(err, ledger.ErrDuplicate) && !errors.Is(err, ledger.ErrGuard) {
		t.Fatalf("replay: %v", err)
	}
	if c, err := grantOne(s, "m-1", 1000, "g-1"); err != nil || !c.Duplicate {
		t.Fatalf("grant again: dup %v, %v", c.Duplicate, err)
	}
	if got := outboxIDs(t, s); len(got) != len(want) {
		t.Fatalf("a replay wrote outbox rows: %v", got[len(want):])
	}
	if _, err := grantOne(s, "m-1", 300, "g-2"); err != nil {
		t.Fatal(err)
	}
	// 20% is of what the merchant holds after the grant: 300.
	want = append(want, "g-2/quota.granted", "g-2/quota.recovered/0", "g-2/quota.recovered/60")
	if got := outboxIDs(t, s); fmtList(got) != fmtList(want) {
		t.Fatalf("outbox after a grant %v, want %v", got, want)
	}
}

func fmtList(l []string) string { return strings.Join(l, " ") }
