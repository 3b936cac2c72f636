// Package plan is recurring plan grants: a merchant's plan grants Amount at
// the start of every period (Every after Anchor), expiring at the next
// period's start. Period arithmetic is pure (Period); Store keeps the
// merchant_plans table. The grant of a period is issued once (its id is
// derived from the period's start) through the one grant path.
package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
)

// Every is a plan's period: Months calendar months, or a fixed Duration.
type Every struct {
	Months   int
	Duration time.Duration
}

// ParseEvery reads "1mo" or "3mo" (calendar months), "7d" (days), or a Go
// duration ("12h", "90s").
func ParseEvery(s string) (Every, error) {
	var e Every
	switch {
	case strings.HasSuffix(s, "mo"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "mo"))
		if err != nil || n < 1 || n > 120 {
			return e, fmt.Errorf("plan: period %q: months must be 1..120", s)
		}
		e.Months = n
	case strings.HasSuffix(s, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil || n < 1 || n > 3660 {
			return e, fmt.Errorf("plan: period %q: days must be 1..3660", s)
		}
		e.Duration = time.Duration(n) * 24 * time.Hour
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			return e, fmt.Errorf("plan: period %q is not Nmo, Nd or a duration of 1s or more", s)
		}
		e.Duration = d.Truncate(time.Second)
	}
	return e, nil
}

func (e Every) String() string {
	if e.Months > 0 {
		return strconv.Itoa(e.Months) + "mo"
	}
	return e.Duration.String()
}

// Plan is one merchant_plans row.
type Plan struct {
	MerchantID  string
	Amount      int64
	Every       Every
	RolloverMax int64
	Priority    int
	Anchor      time.Time // the start of the first period
	NextStart   time.Time // the start of the first period not issued yet
}

// ErrInvalid: a plan the table would refuse.
var ErrInvalid = errors.New("plan: invalid")

// Check reports what the table would refuse.
func (p Plan) Check() error {
	switch {
	case p.Amount < 1:
		return fmt.Errorf("%w: amount %d must be positive", ErrInvalid, p.Amount)
	case p.RolloverMax < 0:
		return fmt.Errorf("%w: rollover_max %d is negative", ErrInvalid, p.RolloverMax)
	case p.Priority < 0 || p.Priority > 100:
		return fmt.Errorf("%w: priority %d is outside 0..100", ErrInvalid, p.Priority)
	case (p.Every.Months > 0) == (p.Every.Duration > 0):
		return fmt.Errorf("%w: the period is months or a duration", ErrInvalid)
	}
	return nil
}

// start is the start of period k. A period of months starts on the anchor's
// day of the month, or on the month's last day when it has fewer days (an
// anchor on the 31st: Feb 28, Mar 31), as billing calendars do; AddDate would
// carry Feb 31 into March and skip a period.
func (p Plan) start(k int) time.Time {
	if p.Every.Months > 0 {
		a := p.Anchor
		first := time.Date(a.Year(), a.Month()+time.Month(k*p.Every.Months), 1, a.Hour(), a.Minute(), a.Second(), a.Nanosecond(), a.Location())
		last := first.AddDate(0, 1, -1).Day()
		return first.AddDate(0, 0, min(a.Day(), last)-1)
	}
	return p.Anchor.Add(time.Duration(k) * p.Every.Duration)
}

// Period is the period that contains now, ok false before the anchor: its
// start and end (the next period's start). Periods between NextStart and
// that one were missed entirely (the scheduler was down through them): they
// are not issued, since their grants would have expired unused.
func (p Plan) Period(now time.Time) (start, end time.Time, ok bool) {
	if now.Before(p.Anchor) {
		return time.Time{}, time.Time{}, false
	}
	var k int
	if p.Every.Months > 0 {
		k = (now.Year()-p.Anchor.Year())*12 + int(now.Month()-p.Anchor.Month())
		k = max(0, k/p.Every.Months-1)
	} else {
		k = int(now.Sub(p.Anchor) / p.Every.Duration)
	}
	for k > 0 && p.start(k).After(now) {
		k--
	}
	for !p.start(k + 1).After(now) {
		k++
	}
	return p.start(k), p.start(k + 1), true
}

// GrantID is the id of the grant of the period starting at start: issued
// once, however often the scheduler runs or restarts.
func GrantID(merchantID string, start time.Time) string {
	return ledger.DerivedID("plan:", merchantID+":"+strconv.FormatInt(start.Unix(), 10))
}
