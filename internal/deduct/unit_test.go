package deduct

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestParsePending(t *testing.T) {
	at := time.UnixMilli(1_764_400_000_123).UTC()
	for _, tc := range []struct {
		in     string
		amount int64
		at     time.Time
		bad    bool
	}{
		{in: FormatPending(3, at), amount: 3, at: at},
		{in: "1000000000000:0", amount: 1_000_000_000_000, at: time.UnixMilli(0).UTC()},
		{in: "7", amount: 7}, // the older form, without a time
		{in: "", bad: true},
		{in: "0:5", bad: true},
		{in: "-1:5", bad: true},
		{in: "x:5", bad: true},
		{in: "3:", bad: true},
		{in: "3:soon", bad: true},
	} {
		amount, got, err := ParsePending(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParsePending(%q) accepted", tc.in)
			}
			continue
		}
		if err != nil || amount != tc.amount || !got.Equal(tc.at) {
			t.Errorf("ParsePending(%q) = %d, %v, %v; want %d, %v", tc.in, amount, got, err, tc.amount, tc.at)
		}
	}
}

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

// TestRunAllFallsBackToEval: a script the server has never seen (NOSCRIPT on
// EVALSHA, as after a restart or failover) still runs, in a pipeline.
func TestRunAllFallsBackToEval(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	src := fmt.Sprintf("-- %s\nreturn {'ok', ARGV[1]}", testenv.UniqueName(t, "script"))
	s := redis.NewScript(src)
	if ok, err := s.Exists(ctx, r.Client).Result(); err != nil || ok[0] {
		t.Fatalf("script unexpectedly cached: %v %v", ok, err)
	}
	calls := []*scriptCall{{script: s, args: []any{"a"}}, {script: s, args: []any{"b"}}}
	runAll(ctx, r.Client, calls)
	for i, c := range calls {
		rep, err := parseReply(c.cmd)
		if err != nil || rep.status != "ok" || rep.values[0] != string(rune('a'+i)) {
			t.Errorf("call %d: %+v, %v", i, rep, err)
		}
	}
	if ok, err := s.Exists(ctx, r.Client).Result(); err != nil || !ok[0] {
		t.Errorf("script not cached after the fallback: %v %v", ok, err)
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
