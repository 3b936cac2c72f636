package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ExistingEvents returns the ledger rows (id, event_id, merchant_id, kind,
// amount, balance_after) of those eventIDs that have one, in one query.
func (s *Store) ExistingEvents(ctx context.Context, eventIDs []string) (map[string]Row, error) {
	out := make(map[string]Row, len(eventIDs))
	if len(eventIDs) == 0 {
		return out, nil
	}
	in, args := InList(eventIDs)
	err := queryRaw(s.db.WithContext(ctx),
		"SELECT id, event_id, merchant_id, kind, amount, balance_after FROM quota_ledger WHERE event_id IN ("+in+")",
		args, func(rows *sql.Rows) error {
			var r Row
			var kind string
			var after sql.NullInt64
			if err := rows.Scan(&r.ID, &r.EventID, &r.MerchantID, &kind, &r.Amount, &after); err != nil {
				return err
			}
			r.Kind = Kind(kind)
			if after.Valid {
				r.BalanceAfter = &after.Int64
			}
			out[r.EventID] = r
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: existing events: %w", err)
	}
	return out, nil
}

// Balances returns the balance rows of those merchants that have one, in one
// query. A merchant missing from the map is unknown.
func (s *Store) Balances(ctx context.Context, merchantIDs []string) (map[string]Balance, error) {
	out := make(map[string]Balance, len(merchantIDs))
	if len(merchantIDs) == 0 {
		return out, nil
	}
	var rows []Balance
	if err := s.db.WithContext(ctx).Where("merchant_id IN ?", merchantIDs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: balances: %w", err)
	}
	for _, b := range rows {
		out[b.MerchantID] = b
	}
	return out, nil
}

// The write path's statements run on db's connection rather than through
// GORM's builders (their reflection costs as much as the rest of a batch),
// still traced by db's logger and its parameter filter.

// execRaw runs a statement.
func execRaw(db *gorm.DB, query string, args []any) (int64, error) {
	start := time.Now()
	res, err := db.Statement.ConnPool.ExecContext(db.Statement.Context, query, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	trace(db, start, query, args, n, err)
	return n, err
}

// queryRaw runs a query and calls scan for each row.
func queryRaw(db *gorm.DB, query string, args []any, scan func(*sql.Rows) error) error {
	start := time.Now()
	var n int64
	err := func() error {
		rows, err := db.Statement.ConnPool.QueryContext(db.Statement.Context, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for ; rows.Next(); n++ {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}()
	trace(db, start, query, args, n, err)
	return err
}

func trace(db *gorm.DB, start time.Time, query string, args []any, rows int64, err error) {
	if db.Logger == nil {
		return
	}
	ctx := db.Statement.Context
	db.Logger.Trace(ctx, start, func() (string, int64) {
		if f, ok := db.Logger.(gorm.ParamsFilter); ok {
			query, args = f.ParamsFilter(ctx, query, args...)
		}
		return db.Dialector.Explain(query, args...), rows
	}, err)
}
