package idgen

import (
	"errors"
	"fmt"
	"time"
)

// Every error NextID and NextIDs return is an outage: Outage() reports true
// (internal/failure classifies errors by it), because a clock or lease
// refusal describes this server, never the message that asked for an ID.
var (
	// ErrClockBackward: the clock is further behind the newest issued ID than
	// Options.MaxBackwardWait. Returned at once, as a *ClockBackwardError, so
	// the caller can retry elsewhere (another worker, later) instead of blocking.
	ErrClockBackward error = outage("idgen: clock moved backward")
	// ErrTimeExhausted: the clock is past the last millisecond the 41 time bits
	// can hold (in 2093). Never a wrapped or negative ID instead.
	ErrTimeExhausted error = outage("idgen: timestamp bits exhausted")
	// ErrClockBeforeEpoch: the clock reads before 2024-01-01.
	ErrClockBeforeEpoch error = outage("idgen: clock before epoch")
	// ErrClockStalled: one call waited longer than Options.MaxWait for the
	// clock to move on.
	ErrClockStalled error = outage("idgen: clock did not advance")
	// ErrLeaseNotValid: the generator's worker lease is lost, expired or not yet
	// usable, or the clock is outside the time range the lease covers.
	ErrLeaseNotValid error = outage("idgen: worker lease not valid")
	// ErrWorkerHeld: another live holder has the worker ID (see *HeldError).
	ErrWorkerHeld = errors.New("idgen: worker ID held by another holder")
	// ErrStartWaitTooLong: the previous holders' high-water mark is too far
	// ahead of this clock (see *StartWaitError).
	ErrStartWaitTooLong = errors.New("idgen: high-water mark too far ahead")
	// ErrLeaseNotHeld: Release found the lease key no longer ours.
	ErrLeaseNotHeld = errors.New("idgen: lease not held")
)

// outage is a sentinel error of this server's clock or lease.
type outage string

func (e outage) Error() string { return string(e) }

// Outage reports true: see the errors of NextID.
func (outage) Outage() bool { return true }

// ClockBackwardError says how far the clock is behind the newest issued ID:
// the time it would have to wait. errors.Is(err, ErrClockBackward) holds.
type ClockBackwardError struct {
	By time.Duration
}

func (e *ClockBackwardError) Error() string {
	return fmt.Sprintf("%v by %v", ErrClockBackward, e.By)
}

// Is makes errors.Is(err, ErrClockBackward) true.
func (e *ClockBackwardError) Is(target error) bool { return target == ErrClockBackward }

// Outage reports true: the clock stepped back describes this server.
func (e *ClockBackwardError) Outage() bool { return true }

// HeldError names the live holder of a worker ID. errors.Is(err, ErrWorkerHeld) holds.
type HeldError struct {
	WorkerID  int
	Holder    Holder
	Raw       string        // the lease value as stored, when it is not ours to parse
	ExpiresIn time.Duration // the lease's remaining TTL when we looked
}

func (e *HeldError) Error() string {
	who := fmt.Sprintf("pod %q ip %q since %s", e.Holder.Pod, e.Holder.IP, e.Holder.Since.UTC().Format(time.RFC3339))
	if e.Holder == (Holder{}) {
		who = fmt.Sprintf("unparsable holder %q", e.Raw)
	}
	return fmt.Sprintf("idgen: worker %d is held by %s (lease expires in %v); not taking it over",
		e.WorkerID, who, e.ExpiresIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrWorkerHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrWorkerHeld }

// StartWaitError: a new holder would have to wait Wait (more than Max) for its
// clock to pass HighWater, the newest timestamp a previous holder may have
// used. Usually this clock is set back. errors.Is(err, ErrStartWaitTooLong) holds.
type StartWaitError struct {
	WorkerID  int
	HighWater time.Time
	Wait      time.Duration
	Max       time.Duration
}

func (e *StartWaitError) Error() string {
	return fmt.Sprintf("idgen: worker %d: previous holders' high-water mark %s is %v ahead of this clock (limit %v); is the clock set back?",
		e.WorkerID, e.HighWater.UTC().Format(time.RFC3339Nano), e.Wait.Round(time.Millisecond), e.Max)
}

// Is makes errors.Is(err, ErrStartWaitTooLong) true.
func (e *StartWaitError) Is(target error) bool { return target == ErrStartWaitTooLong }
