package ledgerdb

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/ledger"
)

func TestClassify(t *testing.T) {
	rows := []ledger.Row{{EventID: "a"}, {EventID: "b"}, {EventID: "c"}, {EventID: "d"}}
	mysqlErr := func(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }
	for _, tc := range []struct {
		name      string
		err       error
		is        error
		eventID   string
		transient bool
	}{
		{name: "nil"},
		{name: "guard", err: &ledger.GuardError{MerchantID: "m"}, is: ledger.ErrGuard},
		{name: "duplicate", err: mysqlErr(1062, "Duplicate entry 'a' for key 'quota_ledger_event_id'"), is: ledger.ErrDuplicate},
		{name: "too long in chunk 2", err: &chunkError{offset: 2, err: mysqlErr(1406, "Data too long for column 'payment_id' at row 2")}, is: ledger.ErrRefused, eventID: "d"},
		{name: "check without row", err: &chunkError{offset: 0, err: mysqlErr(4025, "CONSTRAINT `x` failed for `db`.`quota_ledger`")}, is: ledger.ErrRefused},
		{name: "row out of range", err: &chunkError{offset: 0, err: mysqlErr(1406, "Data too long for column 'x' at row 9")}, is: ledger.ErrRefused},
		{name: "connection", err: errors.New("driver: bad connection"), transient: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err, rows)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("classify(nil) = %v", got)
				}
				return
			}
			if tc.is != nil && !errors.Is(got, tc.is) {
				t.Fatalf("classify = %v, want %v", got, tc.is)
			}
			if tc.transient && (errors.Is(got, ledger.ErrGuard) || errors.Is(got, ledger.ErrDuplicate) || errors.Is(got, ledger.ErrRefused)) {
				t.Fatalf("classify = %v, want a plain transient error", got)
			}
			var re *ledger.RefusedError
			if errors.As(got, &re) && re.EventID != tc.eventID {
				t.Fatalf("refused event = %q, want %q", re.EventID, tc.eventID)
			}
		})
	}
}
