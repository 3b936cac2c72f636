package idgen

import (
	"errors"
	"fmt"
	"time"
)

// Every error NextID and NextIDs return is an outage (Outage() true, as
// internal/failure classifies): a clock or lease refusal describes this
// server, never the message that asked for an ID.
var (
	ErrClockBackward    error = outage("idgen: clock moved backward") // as a *ClockBackwardError
	ErrTimeExhausted    error = outage("idgen: timestamp bits exhausted")
	ErrClockBeforeEpoch error = outage("idgen: clock before epoch")
	ErrClockStalled     error = outage("idgen: clock did not advance")
	ErrLeaseNotValid    error = outage("idgen: worker lease not valid")
	// ErrWorkerHeld: another live holder has the worker ID (see *HeldError).
	ErrWorkerHeld = errors.New("idgen: worker ID held by another holder")
	// ErrStartWaitTooLong: the previous holders' high-water mark is too far
	// ahead of this clock (see *StartWaitError).
	ErrStartWaitTooLong = errors.New("idgen: high-water mark too far ahead")
	// ErrLeaseNotHeld: Release found the lease key no longer ours.
	ErrLeaseNotHeld = errors.New("idgen: lease not held")
)

type outage string

func (e outage) Error() string { return string(e) }
func (outage) Outage() bool    { return true }

// ClockBackwardError says how far the clock is behind the newest issued ID.
type ClockBackwardError struct {
	By time.Duration
}

func (e *ClockBackwardError) Error() string {
	return fmt.Sprintf("%v by %v", ErrClockBackward, e.By)
}
func (e *ClockBackwardError) Is(target error) bool { return target == ErrClockBackward }
func (e *ClockBackwardError) Outage() bool         { return true }

// HeldError names the live holder of a worker ID.
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
func (e *HeldError) Is(target error) bool { return target == ErrWorkerHeld }

// StartWaitError: a new holder would have to wait Wait (more than Max) for its
// clock to pass HighWater, the newest timestamp a previous holder may have
// used. Usually this clock is set back.
type StartWaitError struct {
	WorkerID  int
	HighWater time.Time
	Wait, Max time.Duration
}

func (e *StartWaitError) Error() string {
	return fmt.Sprintf("idgen: worker %d: previous holders' high-water mark %s is %v ahead of this clock (limit %v); is the clock set back?",
		e.WorkerID, e.HighWater.UTC().Format(time.RFC3339Nano), e.Wait.Round(time.Millisecond), e.Max)
}
func (e *StartWaitError) Is(target error) bool { return target == ErrStartWaitTooLong }
