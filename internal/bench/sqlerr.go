package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB/MySQL error numbers worth a retry: the transaction was rolled back
// (deadlock) or a statement gave up waiting for a row lock.
const (
	erDeadlock        = 1213
	erLockWaitTimeout = 1205
)

func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == erDeadlock || me.Number == erLockWaitTimeout)
}

const maxTxAttempts = 5

// inTx runs fn in a transaction, retrying the whole transaction when the
// server rolled it back (deadlock) or timed out a lock wait. retries is
// incremented per retry.
func inTx(ctx context.Context, db *sql.DB, retries *counter, fn func(*sql.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = txOnce(ctx, db, fn)
		if err == nil || !retryable(err) {
			return err
		}
		retries.inc()
		if err := sleep(ctx, time.Duration(attempt)*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("bench: transaction failed %d times: %w", maxTxAttempts, err)
}

func txOnce(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bench: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bench: commit: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
