package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/quotaflow/billing/internal/ledger"
)

// balance is a merchant_balance row.
type balance struct {
	Credited, Debited int64
}

// truth is what MySQL says about the merchants of a page, from one snapshot.
type truth struct {
	Balances map[string]balance
	// Debited maps each pending event id that has a debit row to that row's merchant.
	Debited map[string]string
}

// maxInList bounds the values of one IN (...) list.
const maxInList = 1000

// readTruth reads the balance rows of merchants and which of eventIDs have a
// debit row, in one snapshot (two indexed queries per 1000 ids).
func readTruth(ctx context.Context, db *sql.DB, merchants, eventIDs []string) (truth, error) {
	t := truth{Balances: make(map[string]balance, len(merchants)), Debited: make(map[string]string)}
	err := snapshot(ctx, db, func(tx *sql.Tx) error {
		for part := range slices.Chunk(merchants, maxInList) {
			if err := readBalances(ctx, tx, part, t.Balances); err != nil {
				return err
			}
		}
		for part := range slices.Chunk(eventIDs, maxInList) {
			if err := readDebits(ctx, tx, part, t.Debited); err != nil {
				return err
			}
		}
		return nil
	})
	return t, err
}

func readBalances(ctx context.Context, tx *sql.Tx, merchants []string, out map[string]balance) error {
	in, args := ledger.InList(merchants)
	rows, err := tx.QueryContext(ctx,
		"SELECT merchant_id, credited, debited FROM merchant_balance WHERE merchant_id IN ("+in+")", args...)
	if err != nil {
		return fmt.Errorf("reconcile: read balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		var b balance
		if err := rows.Scan(&m, &b.Credited, &b.Debited); err != nil {
			return fmt.Errorf("reconcile: read balances: %w", err)
		}
		out[m] = b
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile: read balances: %w", err)
	}
	return nil
}

func readDebits(ctx context.Context, tx *sql.Tx, eventIDs []string, out map[string]string) error {
	in, args := ledger.InList(eventIDs)
	rows, err := tx.QueryContext(ctx,
		"SELECT event_id, merchant_id FROM quota_ledger WHERE kind = 'debit' AND event_id IN ("+in+")", args...)
	if err != nil {
		return fmt.Errorf("reconcile: read pending events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e, m string
		if err := rows.Scan(&e, &m); err != nil {
			return fmt.Errorf("reconcile: read pending events: %w", err)
		}
		out[e] = m
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile: read pending events: %w", err)
	}
	return nil
}

// listMerchants returns up to limit merchant ids after the given one, in
// primary key order (keyset pagination).
func listMerchants(ctx context.Context, db *sql.DB, after string, limit int) ([]string, error) {
	rows, err := db.QueryContext(ctx,
		"SELECT merchant_id FROM merchant_balance WHERE merchant_id > ? ORDER BY merchant_id LIMIT ?", after, limit)
	if err != nil {
		return nil, fmt.Errorf("reconcile: list merchants: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("reconcile: list merchants: %w", err)
		}
		ids = append(ids, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile: list merchants: %w", err)
	}
	return ids, nil
}

// snapshot runs fn in a read-only REPEATABLE READ transaction: every statement
// of fn sees the same committed state.
func snapshot(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return ledger.InTx(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, fn)
}
