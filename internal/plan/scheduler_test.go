package plan

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/testenv"
)

// A scheduler that was down at a period start issues that period's grant
// late, with the period's own start and expiry; a period missed entirely is
// skipped; running again (or two schedulers at once) issues nothing twice.
func TestSchedulerMissedPeriodStart(t *testing.T) {
	db := testenv.NewMySQL(t)
	store := NewStore(db.SQL)
	ctx := context.Background()
	var mu sync.Mutex
	issued := map[string]event.GrantCommand{}
	calls := 0
	issue := func(_ context.Context, g event.GrantCommand) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		issued[g.GrantID] = g
		return nil
	}
	known(t, db, "m-1", "m-2")
	now := time.Now().UTC()
	// Anchored 2.5 hours ago, hourly: periods 0 and 1 were missed; period 2 is current.
	anchor := now.Add(-150 * time.Minute).Truncate(time.Second)
	if err := store.Set(ctx, Plan{MerchantID: "m-1", Amount: 100, Every: Every{Duration: time.Hour}, RolloverMax: 10, Priority: 3, Anchor: anchor}); err != nil {
		t.Fatal(err)
	}
	// A plan whose first period starts later is not due.
	if err := store.Set(ctx, Plan{MerchantID: "m-2", Amount: 5, Every: Every{Months: 1}, Priority: 50, Anchor: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := NewScheduler(store, issue).RunOnce(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, err := NewScheduler(store, issue).RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a third run issued %d, %v", n, err)
	}
	start, end := anchor.Add(2*time.Hour), anchor.Add(3*time.Hour)
	want := GrantID("m-1", start)
	g, ok := issued[want]
	if len(issued) != 1 || !ok {
		t.Fatalf("issued %v, want only %s", issued, want)
	}
	if !g.StartsAt.Equal(start) || !g.ExpiresAt.Equal(end) || g.Amount != 100 || g.RolloverMax != 10 || g.PriorityOr() != 3 {
		t.Errorf("grant = %+v", g)
	}
	if calls > 2 {
		t.Errorf("%d issue calls for one period (at most one per scheduler)", calls)
	}
	p, ok, err := store.Get(ctx, "m-1")
	if err != nil || !ok || !p.NextStart.Equal(end) {
		t.Errorf("next period = %v, %v, %v; want %v", p.NextStart, ok, err, end)
	}
}

// One plan's failure does not hold up the others. A period whose grant
// conflicts (the plan changed after it was issued) keeps it and the plan moves
// on; another permanent failure leaves the plan due; a plan set again
// mid-period does not issue its current period a second time.
func TestSchedulerGoesOnPastAFailingPlan(t *testing.T) {
	db := testenv.NewMySQL(t)
	store := NewStore(db.SQL)
	ctx := context.Background()
	anchor := time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)
	hourly := func(m string, amount int64) Plan {
		return Plan{MerchantID: m, Amount: amount, Every: Every{Duration: time.Hour}, Priority: 50, Anchor: anchor}
	}
	known(t, db, "m-conflict", "m-invalid", "m-good")
	for _, p := range []Plan{hourly("m-conflict", 10), hourly("m-invalid", 20), hourly("m-good", 30)} {
		if err := store.Set(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	issued := map[string]int64{}
	issue := func(_ context.Context, g event.GrantCommand) error {
		switch g.MerchantID {
		case "m-conflict":
			return failure.Permanent(failure.ClassConflict, errors.New("issued before with another amount"))
		case "m-invalid":
			return failure.Permanent(failure.ClassInvalid, errors.New("refused"))
		}
		issued[g.GrantID] += g.Amount
		return nil
	}
	s := NewScheduler(store, issue)
	n, err := s.RunOnce(ctx)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "m-conflict") || !strings.Contains(err.Error(), "m-invalid") {
		t.Fatalf("RunOnce = %d, %v; want 1 issued and both failures reported", n, err)
	}
	end := anchor.Add(time.Hour)
	for m, want := range map[string]time.Time{"m-conflict": end, "m-invalid": anchor, "m-good": end} {
		if p, _, err := store.Get(ctx, m); err != nil || !p.NextStart.Equal(want) {
			t.Errorf("%s next period %v (%v), want %v", m, p.NextStart, err, want)
		}
	}
	// The good plan changes mid-period: its current period keeps its grant.
	if err := store.Set(ctx, hourly("m-good", 99)); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.RunOnce(ctx); n != 0 || len(issued) != 1 || issued[GrantID("m-good", anchor)] != 30 {
		t.Fatalf("after the change: %d issued, grants %v", n, issued)
	}
}

// One pass issues every plan due, not one page of them: 250 monthly plans
// renewing at the same instant all get their grant at once, instead of 100
// per pass with a pass a second (the last of 10,000 would be 100 s late).
func TestSchedulerIssuesMoreThanAPage(t *testing.T) {
	db := testenv.NewMySQL(t)
	store := NewStore(db.SQL)
	ctx := context.Background()
	const plans = 2*schedulerBatch + 50
	anchor := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	for i := range plans {
		m := "m-" + strconv.Itoa(i)
		known(t, db, m)
		if err := store.Set(ctx, Plan{MerchantID: m, Amount: 10, Every: Every{Months: 1}, Priority: 5, Anchor: anchor}); err != nil {
			t.Fatal(err)
		}
	}
	issued := 0
	issue := func(context.Context, event.GrantCommand) error { issued++; return nil }
	if n, err := NewScheduler(store, issue).RunOnce(ctx); err != nil || n != plans || issued != plans {
		t.Fatalf("one pass issued %d (%d calls), %v; want all %d", n, issued, err, plans)
	}
	if d, ok, err := store.UntilNextPeriod(ctx); err != nil || !ok || d <= 0 {
		t.Fatalf("next period in %v (%v, %v): a plan still due after the pass", d, ok, err)
	}
}
