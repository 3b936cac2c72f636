package deduct

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Field names of the quota:{m} hash.
const (
	FieldRemain   = "remain"
	FieldVer      = "ver"
	PendingPrefix = "p:" // followed by the event id
)

// FormatPending renders a pending field's value: "<amount>:<unix_ms>".
func FormatPending(amount int64, at time.Time) string {
	return strconv.FormatInt(amount, 10) + ":" + strconv.FormatInt(at.UnixMilli(), 10)
}

// ParsePending reads a pending field's value. The older form "<amount>" (no
// time) is accepted with a zero time.
func ParsePending(v string) (amount int64, at time.Time, err error) {
	a, ms, hasTime := strings.Cut(v, ":")
	amount, err = strconv.ParseInt(a, 10, 64)
	if err != nil || amount <= 0 {
		return 0, time.Time{}, fmt.Errorf("deduct: pending value %q: amount is not a positive integer", v)
	}
	if !hasTime {
		return amount, time.Time{}, nil
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return 0, time.Time{}, fmt.Errorf("deduct: pending value %q: time is not unix milliseconds", v)
	}
	return amount, time.UnixMilli(n).UTC(), nil
}
