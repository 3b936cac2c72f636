package ledger

import (
	"database/sql"
	"time"

	"gorm.io/gorm"
)

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
