package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// balance is a merchant_balance row.
type balance struct {
	Credited, Debited int64
	Policy            ledger.Policy
}

// belowPolicy reports a balance under the lowest its overdraft policy allows.
func (b balance) belowPolicy() bool {
	lowest, bounded := b.Policy.Lowest()
	return bounded && b.Credited-b.Debited < lowest
}

// describe says how the balance breaks its policy.
func (b balance) describe() string {
	return fmt.Sprintf("credited=%d - debited=%d is below what the overdraft policy %s allows", b.Credited, b.Debited, b.Policy)
}

// maxInList bounds the values of one IN (...) list.
const maxInList = 1000

// readTruth reads, in one snapshot, the balance rows of merchants and the
// merchant of each of eventIDs that has a debit row.
func readTruth(ctx context.Context, db *sql.DB, merchants, eventIDs []string) (map[string]balance, map[string]string, error) {
	balances, debited := make(map[string]balance, len(merchants)), make(map[string]string)
	err := snapshot(ctx, db, func(tx *sql.Tx) error {
		for part := range slices.Chunk(merchants, maxInList) {
			in, args := sqltx.InList(part)
			err := query(ctx, tx, "read balances", func(rows *sql.Rows) error {
				var m string
				var b balance
				err := rows.Scan(&m, &b.Credited, &b.Debited, &b.Policy.Kind, &b.Policy.Floor)
				balances[m] = b
				return err
			}, "SELECT merchant_id, credited, debited, overdraft_policy, overdraft_floor FROM merchant_balance WHERE merchant_id IN ("+in+")", args...)
			if err != nil {
				return err
			}
		}
		for part := range slices.Chunk(eventIDs, maxInList) {
			in, args := sqltx.InList(part)
			err := query(ctx, tx, "read pending events", func(rows *sql.Rows) error {
				var e, m string
				err := rows.Scan(&e, &m)
				debited[e] = m
				return err
			}, "SELECT event_id, merchant_id FROM quota_ledger WHERE kind = 'debit' AND event_id IN ("+in+")", args...)
			if err != nil {
				return err
			}
		}
		return nil
	})
	return balances, debited, err
}

// query runs q and calls scan for each row; errors name what.
func query(ctx context.Context, db sqltx.Querier, what string, scan func(*sql.Rows) error, q string, args ...any) error {
	if _, err := sqltx.Each(ctx, db, q, args, scan); err != nil {
		return fmt.Errorf("reconcile: %s: %w", what, err)
	}
	return nil
}

// snapshot runs fn in a read-only REPEATABLE READ transaction: every statement
// of fn sees the same committed state.
func snapshot(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, fn)
}
