package dlq

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter selects dead-letter records. Every set field must match; the zero
// Filter selects everything. Lists match any of their values.
type Filter struct {
	Classes    []Class
	Merchants  []string  // as Entry.Merchant
	EventIDs   []string  // as Entry.EventID
	Since      TimeBound // inclusive, on the DLQ record's timestamp (when it was dead-lettered)
	Until      TimeBound // exclusive, same clock
	Partitions []int     // DLQ partitions
	OffsetFrom int64     // lowest DLQ offset, inclusive (0: from the start)
	OffsetEnd  int64     // DLQ offset bound, exclusive (0: none); --offset-to N is OffsetEnd N+1
}

// TimeBound is a point in time as the operator wrote it: Spec keeps the text
// (so a relative "2h" names the same selection on every run) and At the
// instant it resolved to for this run.
type TimeBound struct {
	Spec string
	At   time.Time
}

// key is the bound's text in a selection key.
func (b TimeBound) key() string {
	if b.Spec == "" && !b.At.IsZero() {
		return b.At.UTC().Format(time.RFC3339Nano)
	}
	return b.Spec
}

// IsZero reports whether the bound is unset.
func (b TimeBound) IsZero() bool { return b.At.IsZero() }

// ErrBadTime means a time bound is neither RFC 3339 nor a duration.
var ErrBadTime = errors.New("dlq: not an RFC 3339 time or a duration")

// ParseTimeBound reads an RFC 3339 time ("2026-11-29T07:00:00Z") or a
// duration ago ("90m", "2h", "7d"). An empty spec is the zero bound.
func ParseTimeBound(spec string, now time.Time) (TimeBound, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return TimeBound{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, spec); err == nil {
		return TimeBound{Spec: t.UTC().Format(time.RFC3339Nano), At: t.UTC()}, nil
	}
	d, err := parseAgo(spec)
	if err != nil || d < 0 {
		return TimeBound{}, fmt.Errorf("%w: %q", ErrBadTime, spec)
	}
	return TimeBound{Spec: spec, At: now.Add(-d).UTC()}, nil
}

// parseAgo is time.ParseDuration plus whole days ("7d").
func parseAgo(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// Validate reports every inconsistency at once.
func (f Filter) Validate() error {
	var errs []error
	if f.OffsetFrom < 0 {
		errs = append(errs, fmt.Errorf("dlq: offset-from %d is negative", f.OffsetFrom))
	}
	if f.OffsetEnd < 0 || (f.OffsetEnd > 0 && f.OffsetEnd <= f.OffsetFrom) {
		errs = append(errs, fmt.Errorf("dlq: offset range [%d, %d) is empty", f.OffsetFrom, f.OffsetEnd))
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.At.After(f.Since.At) {
		errs = append(errs, fmt.Errorf("dlq: until %s is not after since %s", f.Until.At.Format(time.RFC3339), f.Since.At.Format(time.RFC3339)))
	}
	for _, p := range f.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("dlq: partition %d is negative", p))
		}
	}
	return errors.Join(errs...)
}

// Match reports whether the entry is selected.
func (f Filter) Match(e Entry) bool {
	switch {
	case len(f.Classes) > 0 && !slices.Contains(f.Classes, e.Class):
	case len(f.Merchants) > 0 && !slices.Contains(f.Merchants, e.Merchant):
	case len(f.EventIDs) > 0 && !slices.Contains(f.EventIDs, e.EventID):
	case !f.Since.IsZero() && e.Time.Before(f.Since.At):
	case !f.Until.IsZero() && !e.Time.Before(f.Until.At):
	case len(f.Partitions) > 0 && !slices.Contains(f.Partitions, e.Partition):
	case e.Offset < f.OffsetFrom:
	case f.OffsetEnd > 0 && e.Offset >= f.OffsetEnd:
	default:
		return true
	}
	return false
}

// Narrow cuts the ranges to the filter's partitions and offsets, so a scan
// reads no more than it must.
func (f Filter) Narrow(rs []Range) []Range {
	out := make([]Range, 0, len(rs))
	for _, r := range rs {
		if len(f.Partitions) > 0 && !slices.Contains(f.Partitions, r.Partition) {
			continue
		}
		r.From = max(r.From, f.OffsetFrom)
		if f.OffsetEnd > 0 {
			r.To = min(r.To, f.OffsetEnd)
		}
		r.To = max(r.To, r.From)
		out = append(out, r)
	}
	return out
}

// Key is the canonical text of the selection: the same filter, however its
// lists were ordered or repeated, gives the same key.
func (f Filter) Key() string {
	var parts []string
	add := func(name string, vals []string) {
		if len(vals) == 0 {
			return
		}
		vals = slices.Compact(slices.Sorted(slices.Values(vals)))
		parts = append(parts, name+"="+strings.Join(vals, ","))
	}
	classes := make([]string, len(f.Classes))
	for i, c := range f.Classes {
		classes[i] = string(c)
	}
	add("class", classes)
	add("merchant", f.Merchants)
	add("event", f.EventIDs)
	if k := f.Since.key(); k != "" {
		parts = append(parts, "since="+k)
	}
	if k := f.Until.key(); k != "" {
		parts = append(parts, "until="+k)
	}
	ps := slices.Compact(slices.Sorted(slices.Values(f.Partitions)))
	if len(ps) > 0 {
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = strconv.Itoa(p)
		}
		parts = append(parts, "partition="+strings.Join(strs, ","))
	}
	if f.OffsetFrom > 0 {
		parts = append(parts, "offset-from="+strconv.FormatInt(f.OffsetFrom, 10))
	}
	if f.OffsetEnd > 0 {
		parts = append(parts, "offset-to="+strconv.FormatInt(f.OffsetEnd-1, 10))
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

// Classes lists the error classes a record can have.
func Classes() []Class { return []Class{ClassInvalid, ClassConflict, ClassRefused, ClassExhausted} }

// ErrUnknownClass means an error class is not one of Classes.
var ErrUnknownClass = errors.New("dlq: unknown error class")

// ParseClasses reads a comma-separated list of error classes.
func ParseClasses(s string) ([]Class, error) {
	var out []Class
	for _, part := range splitList(s) {
		c := Class(part)
		if !slices.Contains(Classes(), c) {
			return nil, fmt.Errorf("%w %q (one of invalid, conflict, refused, exhausted)", ErrUnknownClass, part)
		}
		out = append(out, c)
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
