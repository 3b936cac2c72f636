package ledger

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestClassify(t *testing.T) {
	rows := []Row{{EventID: "a"}, {EventID: "b"}, {EventID: "c"}, {EventID: "d"}}
	mysqlErr := func(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }
	for _, tc := range []struct {
		name      string
		err       error
		is        error
		eventID   string
		transient bool
	}{
		{name: "nil"},
		{name: "guard", err: &GuardError{MerchantID: "m"}, is: ErrGuard},
		{name: "duplicate", err: mysqlErr(1062, "Duplicate entry 'a' for key 'quota_ledger_event_id'"), is: ErrDuplicate},
		{name: "too long in chunk 2", err: &chunkError{offset: 2, err: mysqlErr(1406, "Data too long for column 'payment_id' at row 2")}, is: ErrRefused, eventID: "d"},
		{name: "check without row", err: &chunkError{offset: 0, err: mysqlErr(4025, "CONSTRAINT `x` failed for `db`.`quota_ledger`")}, is: ErrRefused},
		{name: "row out of range", err: &chunkError{offset: 0, err: mysqlErr(1406, "Data too long for column 'x' at row 9")}, is: ErrRefused},
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
			if tc.transient && (errors.Is(got, ErrGuard) || errors.Is(got, ErrDuplicate) || errors.Is(got, ErrRefused)) {
				t.Fatalf("classify = %v, want a plain transient error", got)
			}
			var re *RefusedError
			if errors.As(got, &re) && re.EventID != tc.eventID {
				t.Fatalf("refused event = %q, want %q", re.EventID, tc.eventID)
			}
		})
	}
}

func TestRowCheck(t *testing.T) {
	ok := debit("e", "m", 1)
	if err := ok.Check(); err != nil {
		t.Fatalf("valid row refused: %v", err)
	}
	for name, mutate := range map[string]func(*Row){
		"empty event":   func(r *Row) { r.EventID = "" },
		"long merchant": func(r *Row) { r.MerchantID = string(make([]byte, 65)) },
		"zero amount":   func(r *Row) { r.Amount = 0 },
		"bad kind":      func(r *Row) { r.Kind = "refund" },
		"long source":   func(r *Row) { r.Source = "abcdefghijklmnopq" },
		"year 0":        func(r *Row) { r.OccurredAt = r.OccurredAt.AddDate(-r.OccurredAt.Year(), 0, 0) },
		"invalid utf-8": func(r *Row) { r.PaymentID = "\xff" },
	} {
		r := ok
		mutate(&r)
		if r.Check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
