package ledgerdb

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
)

func duplicate(err error) bool { return failure.MySQLNumber(err) == failure.MySQLDupEntry }

func refused(err error) bool {
	switch failure.MySQLNumber(err) {
	case failure.MySQLDataTooLong, failure.MySQLOutOfRange, failure.MySQLTruncated, failure.MySQLIncorrectValue,
		failure.MySQLBadDatetime, failure.MySQLNotNull, failure.MySQLValueOutOfRange, failure.MySQLCheckMySQL,
		failure.MySQLCheckMariaDB:
		return true
	}
	return false
}

var atRow = regexp.MustCompile(`at row (\d+)\s*$`)

// refusedRow returns the 0-based row of a multi-row INSERT named by the
// server's message ("... at row N"), or -1.
func refusedRow(err error) int {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return -1
	}
	m := atRow.FindStringSubmatch(strings.TrimSpace(me.Message))
	if m == nil {
		return -1
	}
	if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 {
		return n - 1
	}
	return -1
}

// chunkError remembers where in rows a failed INSERT statement started.
type chunkError struct {
	offset int
	err    error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

// classify turns a failed transaction into the ledger's errors.
func classify(err error, rows []ledger.Row) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrGuard):
		return err
	case duplicate(err):
		return fmt.Errorf("%w: %w", ledger.ErrDuplicate, err)
	case refused(err):
		re := &ledger.RefusedError{Err: err}
		var ce *chunkError
		if errors.As(err, &ce) {
			if i := refusedRow(err); i >= 0 && ce.offset+i < len(rows) {
				re.EventID = rows[ce.offset+i].EventID
			}
		}
		return re
	}
	return fmt.Errorf("ledger: commit: %w", err)
}
