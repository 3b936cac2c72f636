package ledgerdb

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
)

// A Commit waits until its rows fit in MaxRowsInFlight, gives up with its
// context having written nothing, and one larger than the bound waits for all
// of it.
func TestCommitWaitsForRowsInFlight(t *testing.T) {
	db := testenv.NewMySQL(t)
	s, err := New(db.SQL, &counterIDs{}, nil, Options{MaxRowsInFlight: 10})
	if err != nil {
		t.Fatal(err)
	}
	grant(t, s, "m-a", 1000)
	ctx := context.Background()
	release, err := s.admit(ctx, 8) // another batch writing 8 rows
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []ledger.Row{debit("e1", "m-a", 1), debit("e2", "m-a", 1)}); err != nil {
		t.Fatalf("2 rows beside 8 of 10: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.Commit(short, []ledger.Row{debit("e3", "m-a", 1), debit("e4", "m-a", 1), debit("e5", "m-a", 1)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("3 rows beside 8 of 10 = %v, want DeadlineExceeded", err)
	}
	if ex, _ := s.ExistingEvents(ctx, []string{"e3"}); len(ex) != 0 {
		t.Fatal("a Commit that was not admitted wrote its rows")
	}

	var big []ledger.Row
	for i := range 50 {
		big = append(big, debit(fmt.Sprintf("b%d", i), "m-a", 1))
	}
	done := make(chan error, 1)
	go func() { done <- s.Commit(ctx, big) }()
	select {
	case err := <-done:
		t.Fatalf("50 rows went in while 8 of 10 were in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, s, "m-a"); b.Debited != 52 {
		t.Fatalf("debited = %d, want 52", b.Debited)
	}
	var m dto.Metric
	if err := s.metrics.commitWaitSeconds.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 3 {
		t.Fatalf("wait observations = %d, want 3 (the 8 rows, the 2 that fit, the 50 that waited)", n)
	}
	checkBalancesMatchLedger(t, s)
}
