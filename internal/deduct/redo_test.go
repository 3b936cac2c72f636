package deduct

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
)

// hookLedger wraps the real ledger and runs each hook once: before the next
// Commit, and after the next existing-events query.
type hookLedger struct {
	Ledger
	beforeCommit  func(ctx context.Context, rows []ledger.Row) error
	afterExisting func(ctx context.Context)
}

func (h *hookLedger) ExistingEvents(ctx context.Context, ids []string) (map[string]ledger.Row, error) {
	rows, err := h.Ledger.ExistingEvents(ctx, ids)
	if f := h.afterExisting; f != nil && err == nil {
		h.afterExisting = nil
		f(ctx)
	}
	return rows, err
}

func (h *hookLedger) Commit(ctx context.Context, rows []ledger.Row) error {
	if f := h.beforeCommit; f != nil {
		h.beforeCommit = nil
		if err := f(ctx, rows); err != nil {
			return err
		}
	}
	return h.Ledger.Commit(ctx, rows)
}

func (e *env) hookedDeductor(h *hookLedger) *Deductor {
	e.t.Helper()
	h.Ledger = e.store
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, h, nil, nil, Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// TestConcurrentInsertIsRedone: another holder (we lost the lock for a while)
// records one of our events between our existing-events query and our
// insert. The unique key stops our transaction; the redo sees a duplicate.
func TestConcurrentInsertIsRedone(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	h := &hookLedger{beforeCommit: func(ctx context.Context, rows []ledger.Row) error {
		other := rows[0]
		other.ID = 0
		return e.store.Commit(ctx, []ledger.Row{other})
	}}
	d := e.hookedDeductor(h)
	res := e.apply(d, []event.PaymentSucceeded{pay("e1", "m-a", 3), pay("e2", "m-a", 4)})
	if got := outcomes(res); !slices.Equal(got, []Outcome{Duplicate, Applied}) {
		t.Errorf("outcomes = %v, want [duplicate applied]", got)
	}
	if res[1].BalanceAfter != 3 {
		t.Errorf("e2 balance after = %d, want 3", res[1].BalanceAfter)
	}
	e.checkConsistent()
}

// TestRefusedEventIsSetAside: the database refuses one event's values; it
// becomes a permanent error, its Redis deduction is undone, the rest is applied.
func TestRefusedEventIsSetAside(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	e.grant("m-b", 10)
	e.apply(e.d, []event.PaymentSucceeded{pay("w", "m-a", 1)})
	h := &hookLedger{beforeCommit: func(context.Context, []ledger.Row) error {
		return &ledger.RefusedError{EventID: "e2", Err: errors.New("Data too long for column 'payment_id' at row 2")}
	}}
	d := e.hookedDeductor(h)
	res := e.apply(d, []event.PaymentSucceeded{pay("e1", "m-a", 3), pay("e2", "m-a", 4), pay("e3", "m-b", 2), pay("e4", "m-a", 5)})
	if got := outcomes(res); !slices.Equal(got, []Outcome{Applied, Refused, Applied, Applied}) {
		t.Fatalf("outcomes = %v", got)
	}
	if failure.ClassOf(res[1].Err) != failure.ClassRefused {
		t.Errorf("refused event error = %v, want class refused", res[1].Err)
	}
	if res[3].BalanceAfter != 1 {
		t.Errorf("e4 balance after = %d, want 1 (e2 not counted)", res[3].BalanceAfter)
	}
	if remain, _ := e.quota("m-a"); remain != 1 {
		t.Errorf("m-a remain = %d, want 1: the refused event's deduction must be undone", remain)
	}
	if ex, _ := e.store.ExistingEvents(context.Background(), []string{"e2"}); len(ex) != 0 {
		t.Error("the refused event has a row")
	}
	e.checkConsistent()
}

// TestRedoIsBounded: a cause that never goes away ends as a transient error.
func TestRedoIsBounded(t *testing.T) {
	e := newEnv(t)
	e.grant("m-a", 10)
	h := &alwaysGuard{}
	h.Ledger = e.store
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, h, nil, nil, Options{MaxRedo: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Apply(context.Background(), []event.PaymentSucceeded{pay("e1", "m-a", 1)})
	if err == nil || failure.IsPermanent(err) || !errors.Is(err, ledger.ErrGuard) {
		t.Fatalf("Apply = %v, want a transient error after the redos", err)
	}
	if h.calls != 4 {
		t.Errorf("%d commits, want 4 (1 + 3 redos)", h.calls)
	}
	if n, _ := e.redis.Client.Exists(context.Background(), e.redis.Keys.Lock("m-a")).Result(); n != 0 {
		t.Error("lock not released after a failed batch")
	}
}

type alwaysGuard struct {
	Ledger
	calls int
}

func (a *alwaysGuard) Commit(_ context.Context, rows []ledger.Row) error {
	a.calls++
	return &ledger.GuardError{MerchantID: rows[0].MerchantID, Amount: rows[0].Amount}
}
