// Package sqltx holds the SQL mechanics every store shares: a transaction
// committed or rolled back as its function returns, the retry of one that
// lost to a deadlock or a lock wait timeout, and IN lists.
package sqltx

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/quotaflow/billing/internal/failure"
)

// Attempts bounds RetryDeadlocks.
const Attempts = 5

// ReadCommitted is the isolation of the transactions that write grants: a
// locking read of a merchant's rows then locks the rows it finds and no gap
// beside them, where neighbouring merchants' rows are inserted (under
// REPEATABLE READ those gap locks made transactions of unrelated merchants
// deadlock). Their consistency comes from the balance rows they lock first.
var ReadCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Run runs fn in a transaction of db, committed when fn returns nil and
// rolled back otherwise.
func Run(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("sqltx: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqltx: commit: %w", err)
	}
	return nil
}

// RetryDeadlocks runs fn, again while it fails with a deadlock or a lock wait
// timeout (rolled back: safe to rerun), up to Attempts times, with jittered
// backoff from 5ms; onRetry, if not nil, runs before each retry.
func RetryDeadlocks(ctx context.Context, onRetry func(), fn func() error) error {
	var last error
	n := 0
	op := func() error {
		n++
		if last = fn(); last != nil && !Contention(last) {
			return backoff.Permanent(last)
		}
		return last
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(5*time.Millisecond), backoff.WithMultiplier(2),
		backoff.WithMaxElapsedTime(0))
	err := backoff.RetryNotify(op, backoff.WithContext(backoff.WithMaxRetries(b, Attempts-1), ctx), func(error, time.Duration) {
		if onRetry != nil {
			onRetry()
		}
	})
	switch {
	case err == nil || !Contention(last):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("sqltx: %w (after %v)", ctx.Err(), last)
	}
	return fmt.Errorf("sqltx: gave up after %d attempts: %w", n, last)
}

// Contention reports a deadlock or a lock wait timeout.
func Contention(err error) bool {
	n := failure.MySQLNumber(err)
	return n == failure.MySQLDeadlock || n == failure.MySQLLockWaitTimeout
}

// Querier runs a read: the pool, a connection or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Each runs query on q and calls scan for each row; it returns how many.
func Each(ctx context.Context, q Querier, query string, args []any, scan func(*sql.Rows) error) (n int64, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for ; rows.Next(); n++ {
		if err := scan(rows); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
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

// Until reads a query's one value, a microsecond count such as
// TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(due)), as how long until
// then by MySQL's clock; false when it is NULL (nothing is due).
func Until(ctx context.Context, q Querier, query string) (time.Duration, bool, error) {
	var us sql.NullInt64
	_, err := Each(ctx, q, query, nil, func(rows *sql.Rows) error { return rows.Scan(&us) })
	return time.Duration(us.Int64) * time.Microsecond, us.Valid, err
}
