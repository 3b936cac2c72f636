package ledger

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors; errors.As gives *GuardError and *RefusedError their details.
var (
	// ErrUnknownMerchant: the merchant has no merchant_balance row (grant first).
	ErrUnknownMerchant = errors.New("ledger: merchant unknown to billing (no merchant_balance row)")
	ErrGuard           = errors.New("ledger: balance guard refused the debit")
	ErrDuplicate       = errors.New("ledger: duplicate ledger row") // rolled back
	ErrConflict        = errors.New("ledger: event id already recorded with different content")
	ErrRefused         = errors.New("ledger: value refused by the database")
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
