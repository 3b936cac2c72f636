// Package failure is the error taxonomy shared by the write path and the
// consumer: an error is permanent (dead-letter it now, retrying cannot help) or
// transient (retry with backoff). Business outcomes are not errors at all. A
// transient error that describes a server rather than the message is an
// outage (IsOutage): retried for as long as it lasts, never the message's fault.
//
// An error that was never classified counts as transient: retrying an unknown
// failure a bounded number of times is safer than dead-lettering on the first.
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
