// Package failure is the error taxonomy of the write path and the consumer:
// permanent (dead-letter now) or transient (retry with backoff; an outage,
// IsOutage, for as long as it lasts). An unclassified error is transient.
package failure

import "errors"

// Classes of permanent failure; they become the DLQ record's error class.
const (
	ClassInvalid  = "invalid"  // the message breaks the event contract
	ClassConflict = "conflict" // same event_id with another merchant or amount
	ClassRefused  = "refused"  // the database refuses a value
)

// PermanentError is a failure that retrying cannot fix.
type PermanentError struct {
	Class string
	Err   error
}

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent with a class. A nil err stays nil.
func Permanent(class string, err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Class: class, Err: err}
}

// IsPermanent reports whether err, or anything it wraps, is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// ClassOf returns the class of a permanent error, or "" for a transient one.
func ClassOf(err error) string {
	var p *PermanentError
	if errors.As(err, &p) {
		return p.Class
	}
	return ""
}
