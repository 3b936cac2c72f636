package deduct

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
)

func TestScreen(t *testing.T) {
	long := pay("e9", "m-a", 1)
	long.PaymentID = string(make([]byte, 129))
	for _, tc := range []struct {
		name   string
		batch  []event.PaymentSucceeded
		open   []int
		copies map[int]int
		rivals []int
		fixed  map[int]string // index -> failure class decided without I/O
	}{
		{name: "distinct", batch: []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e2", "m-b", 1)}, open: []int{0, 1}},
		{name: "same twice", batch: []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e1", "m-a", 1)}, open: []int{0}, copies: map[int]int{1: 0}},
		{name: "other amount", batch: []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e1", "m-a", 2)}, open: []int{0}, rivals: []int{1}},
		{name: "other merchant", batch: []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e1", "m-b", 1)}, open: []int{0}, rivals: []int{1}},
		{name: "invalid ids and amount", batch: []event.PaymentSucceeded{pay("e{1}", "m-a", 1), pay("e2", "", 1), pay("e3", "m-a", event.MaxAmount+1)},
			fixed: map[int]string{0: failure.ClassInvalid, 1: failure.ClassInvalid, 2: failure.ClassInvalid}},
		{name: "too long for the table", batch: []event.PaymentSucceeded{long}, fixed: map[int]string{0: failure.ClassRefused}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := make([]Result, len(tc.batch))
			s := screen(tc.batch, results)
			if fmt.Sprint(s.open) != fmt.Sprint(tc.open) {
				t.Errorf("open = %v, want %v", s.open, tc.open)
			}
			if fmt.Sprint(s.copies) != fmt.Sprint(tc.copies) {
				t.Errorf("copies = %v, want %v", s.copies, tc.copies)
			}
			if fmt.Sprint(s.rivals) != fmt.Sprint(tc.rivals) {
				t.Errorf("rivals = %v, want %v", s.rivals, tc.rivals)
			}
			for i, r := range results {
				if got, want := failure.ClassOf(r.Err), tc.fixed[i]; got != want {
					t.Errorf("event %d: class %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestScreenFinishCopiesTheFirstResult(t *testing.T) {
	batch := []event.PaymentSucceeded{pay("e1", "m-a", 1), pay("e1", "m-a", 1), pay("e2", "m-a", 1), pay("e2", "m-a", 1)}
	results := make([]Result, len(batch))
	s := screen(batch, results)
	results[0] = Result{Outcome: Applied, BalanceAfter: 5}
	results[2] = conflict(fmt.Errorf("recorded elsewhere"))
	s.finish(results)
	if results[1].Outcome != Duplicate || results[1].BalanceAfter != 5 {
		t.Errorf("copy of an applied event = %+v", results[1])
	}
	if results[3].Outcome != Conflict || !failure.IsPermanent(results[3].Err) {
		t.Errorf("copy of a conflicting event = %+v", results[3])
	}
}

// A lost lock is never a message's fault: the consumer retries it without
// counting attempts.
func TestLockLostIsAnOutage(t *testing.T) {
	err := lockCause(lostCtx(), errors.New("commit: context canceled"))
	if !errors.Is(err, ErrLockLost) || !failure.IsOutage(err) {
		t.Fatalf("%v: ErrLockLost %v, outage %v", err, errors.Is(err, ErrLockLost), failure.IsOutage(err))
	}
}

func lostCtx() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: merchant m-a", ErrLockLost))
	return ctx
}
