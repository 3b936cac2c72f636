package sqltx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestRetryDeadlocks(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	other := errors.New("bad value")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		errs    []error // fn's answers, in turn; nil after the last
		calls   int
		is      error
		message string
	}{
		{name: "first try", errs: nil, calls: 1},
		{name: "after two deadlocks", errs: []error{deadlock, deadlock}, calls: 3},
		{name: "another error at once", errs: []error{other, deadlock}, calls: 1, is: other},
		{name: "deadlocks to the end", errs: []error{deadlock, deadlock, deadlock, deadlock, deadlock, deadlock}, calls: 5, is: deadlock, message: "gave up after 5 attempts"},
		{name: "cancelled", ctx: cancelled, errs: []error{deadlock}, calls: 1, is: context.Canceled, message: "Deadlock found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			calls, retries := 0, 0
			err := RetryDeadlocks(ctx, func() { retries++ }, func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.calls || retries != calls-1 {
				t.Errorf("%d calls, %d retries; want %d calls", calls, retries, tc.calls)
			}
			if (tc.is == nil) != (err == nil) || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(errString(err), tc.message) {
				t.Errorf("error %v, want %v containing %q", err, tc.is, tc.message)
			}
		})
	}
}

func TestContention(t *testing.T) {
	for n, want := range map[uint16]bool{1213: true, 1205: true, 1062: false, 2006: false} {
		if got := Contention(fmt.Errorf("commit: %w", &mysql.MySQLError{Number: n})); got != want {
			t.Errorf("Contention(%d) = %v, want %v", n, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Microsecond counts past a Duration's reach saturate instead of wrapping.
func TestMicroseconds(t *testing.T) {
	for _, tc := range []struct {
		us   int64
		want time.Duration
	}{
		{1500, 1500 * time.Microsecond},
		{-1500, -1500 * time.Microsecond},
		{253402214400000000, math.MaxInt64 / time.Microsecond * time.Microsecond}, // year 9999 from 1970
		{-253402214400000000, -(math.MaxInt64 / time.Microsecond * time.Microsecond)},
	} {
		if got := microseconds(tc.us); got != tc.want {
			t.Errorf("microseconds(%d) = %v, want %v", tc.us, got, tc.want)
		}
	}
}
