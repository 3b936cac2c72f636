package ledger

import (
	"database/sql"
	"time"

	"gorm.io/gorm"
)

// The write path's statements run through these helpers, on the connection
// (or transaction) of db, rather than through GORM's builders: per batch they
// carry thousands of values, and GORM's reflection and rewriting of every
// placeholder cost as much CPU and garbage as the rest of the batch. They are
// still traced by db's logger (with its parameter filter, so a logger that
// hides values keeps hiding them), and their errors translated as GORM would.

// execRaw runs a statement.
func execRaw(db *gorm.DB, query string, args []any) (int64, error) {
	ctx := db.Statement.Context
	start := time.Now()
	res, err := db.Statement.ConnPool.ExecContext(ctx, query, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	err = translate(db, err)
	trace(db, start, query, args, n, err)
	return n, err
}

// queryRaw runs a query and calls scan for each row.
func queryRaw(db *gorm.DB, query string, args []any, scan func(*sql.Rows) error) error {
	ctx := db.Statement.Context
	start := time.Now()
	var n int64
	err := func() error {
		rows, err := db.Statement.ConnPool.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
			n++
		}
		return rows.Err()
	}()
	err = translate(db, err)
	trace(db, start, query, args, n, err)
	return err
}

func translate(db *gorm.DB, err error) error {
	if err != nil && db.Config.TranslateError {
		if t, ok := db.Dialector.(gorm.ErrorTranslator); ok {
			return t.Translate(err)
		}
	}
	return err
}

func trace(db *gorm.DB, start time.Time, query string, args []any, rows int64, err error) {
	if db.Logger == nil {
		return
	}
	ctx := db.Statement.Context
	db.Logger.Trace(ctx, start, func() (string, int64) {
		q, vars := query, args
		if f, ok := db.Logger.(gorm.ParamsFilter); ok {
			q, vars = f.ParamsFilter(ctx, query, args...)
		}
		return db.Dialector.Explain(q, vars...), rows
	}, err)
}
