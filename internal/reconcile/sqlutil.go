package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// inList returns "?,?,?" for n values and the values as arguments.
func inList(values []string) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(values)), ","), args
}

// chunks splits values into slices of at most n.
func chunks(values []string, n int) [][]string {
	var out [][]string
	for len(values) > n {
		out = append(out, values[:n])
		values = values[n:]
	}
	if len(values) > 0 {
		out = append(out, values)
	}
	return out
}

// snapshot runs fn in a read-only REPEATABLE READ transaction: every statement
// of fn sees the same committed state.
func snapshot(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("reconcile: begin snapshot: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reconcile: end snapshot: %w", err)
	}
	return nil
}

// retryDeadlock runs fn up to three times while it fails with a deadlock or a
// lock wait timeout (InnoDB rolled the statement back: trying again is safe).
func retryDeadlock(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = fn(); !isDeadlock(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return err
}

func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
