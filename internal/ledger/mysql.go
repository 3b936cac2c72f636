package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/quotaflow/billing/internal/failure"
)

// attempts bounds RetryDeadlocks, and Commit's retries of a guard that
// refused a batch every balance covers.
const attempts = 5

// RetryDeadlocks runs fn, again while it fails with a deadlock or a lock wait
// timeout (rolled back: safe to rerun), up to 5 times, with jittered backoff
// from 5ms; onRetry, if not nil, runs before each retry.
func RetryDeadlocks(ctx context.Context, onRetry func(), fn func() error) error {
	var last error
	n := 0
	op := func() error {
		n++
		if last = fn(); last != nil && !contention(last) {
			return backoff.Permanent(last)
		}
		return last
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(5*time.Millisecond), backoff.WithMultiplier(2),
		backoff.WithMaxElapsedTime(0))
	err := backoff.RetryNotify(op, backoff.WithContext(backoff.WithMaxRetries(b, attempts-1), ctx), func(error, time.Duration) {
		if onRetry != nil {
			onRetry()
		}
	})
	switch {
	case err == nil || !contention(last):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("ledger: %w (after %v)", ctx.Err(), last)
	}
	return fmt.Errorf("ledger: gave up after %d attempts: %w", n, last)
}

// contention reports a deadlock or a lock wait timeout.
func contention(err error) bool {
	n := failure.MySQLNumber(err)
	return n == failure.MySQLDeadlock || n == failure.MySQLLockWaitTimeout
}

// InList returns the placeholders of an IN (...) list of values, "?, ?, ?",
// and the values as arguments.
func InList(values []string) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", "), args
}

// InTx runs fn in a transaction of db, committed when fn returns nil and
// rolled back otherwise.
func InTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err)
	}
	return nil
}
