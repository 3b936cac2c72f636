package ledger

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/failure"
)

// Sentinel errors; errors.As gives *GuardError and *RefusedError their details.
var (
	ErrGuard     = errors.New("ledger: balance guard refused the debit")
	ErrDuplicate = errors.New("ledger: duplicate ledger row") // rolled back
	ErrConflict  = errors.New("ledger: event id already recorded with different content")
	ErrRefused   = errors.New("ledger: value refused by the database")
)

// GuardError names a merchant whose cached balance disagrees with MySQL: the
// cache over-reported (MySQL cannot cover the debit), or with Covered
// under-reported (MySQL covers an amount the cache rejected).
type GuardError struct {
	MerchantID string
	Amount     int64
	Covered    bool
}

func (e *GuardError) Error() string {
	if e.Covered {
		return "ledger: balance guard refused a rejection of " + strconv.FormatInt(e.Amount, 10) +
			" for merchant " + e.MerchantID + ": MySQL covers it"
	}
	return "ledger: balance guard refused a debit of " + strconv.FormatInt(e.Amount, 10) +
		" for merchant " + e.MerchantID
}

// Is makes errors.Is(err, ErrGuard) hold.
func (e *GuardError) Is(target error) bool { return target == ErrGuard }

// ExpiryDueError: the guard refused the batch because grants of these
// merchants are due to expire; nothing is written. Drop their caches first
// (a crash then leaves nothing that over-reports), record the expiries
// (Expire), and redo the batch.
type ExpiryDueError struct {
	Merchants []string
}

func (e *ExpiryDueError) Error() string {
	return "ledger: grants of " + strings.Join(e.Merchants, ", ") + " are due to expire before the batch"
}

// RefusedError is a value the database refused; EventID names its row if known.
type RefusedError struct {
	EventID string
	Err     error
}

func (e *RefusedError) Error() string {
	if e.EventID == "" {
		return "ledger: value refused by the database: " + e.Err.Error()
	}
	return "ledger: value of event " + e.EventID + " refused by the database: " + e.Err.Error()
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func duplicate(err error) bool {
	return failure.MySQLNumber(err) == failure.MySQLDupEntry || errors.Is(err, gorm.ErrDuplicatedKey)
}

func refused(err error) bool {
	switch failure.MySQLNumber(err) {
	case failure.MySQLDataTooLong, failure.MySQLOutOfRange, failure.MySQLTruncated, failure.MySQLIncorrectValue,
		failure.MySQLBadDatetime, failure.MySQLNotNull, failure.MySQLValueOutOfRange, failure.MySQLCheckMySQL,
		failure.MySQLCheckMariaDB:
		return true
	}
	return errors.Is(err, gorm.ErrCheckConstraintViolated)
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
	n, convErr := strconv.Atoi(m[1])
	if convErr != nil || n < 1 {
		return -1
	}
	return n - 1
}

// chunkError remembers where in rows a failed INSERT statement started.
type chunkError struct {
	offset int
	err    error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

// classify turns a failed transaction into the package's errors.
func classify(err error, rows []Row) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrGuard):
		return err
	case duplicate(err):
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	case refused(err):
		re := &RefusedError{Err: err}
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
