package dlq

import (
	"cmp"
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
	// ReplayCounts selects records by how many times their payload was
	// replayed before (Record.ReplayCount): 0 never, 1 once, ...
	ReplayCounts []int
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

func (f Filter) problems() problems {
	var errs problems
	errs.add(f.OffsetFrom < 0, "offset-from %d is negative", f.OffsetFrom)
	errs.add(f.OffsetEnd < 0 || (f.OffsetEnd > 0 && f.OffsetEnd <= f.OffsetFrom), "offset range [%d, %d) is empty", f.OffsetFrom, f.OffsetEnd)
	errs.add(!f.Since.IsZero() && !f.Until.IsZero() && !f.Until.At.After(f.Since.At),
		"until %s is not after since %s", f.Until.At.Format(time.RFC3339), f.Since.At.Format(time.RFC3339))
	for _, p := range f.Partitions {
		errs.add(p < 0, "partition %d is negative", p)
	}
	for _, n := range f.ReplayCounts {
		errs.add(n < 0, "replay count %d is negative", n)
	}
	return errs
}

// problems collects the errors of a validation.
type problems []error

func (ps *problems) add(bad bool, format string, args ...any) {
	if bad {
		*ps = append(*ps, fmt.Errorf("dlq: "+format, args...))
	}
}

// match reports whether the entry is selected.
func (f Filter) match(e Entry) bool {
	switch {
	case len(f.Classes) > 0 && !slices.Contains(f.Classes, e.Class):
	case len(f.Merchants) > 0 && !slices.Contains(f.Merchants, e.Merchant):
	case len(f.EventIDs) > 0 && !slices.Contains(f.EventIDs, e.EventID):
	case !f.Since.IsZero() && e.Time.Before(f.Since.At):
	case !f.Until.IsZero() && !e.Time.Before(f.Until.At):
	case len(f.Partitions) > 0 && !slices.Contains(f.Partitions, e.Partition):
	case e.Offset < f.OffsetFrom:
	case f.OffsetEnd > 0 && e.Offset >= f.OffsetEnd:
	case len(f.ReplayCounts) > 0 && (e.Err != nil || !slices.Contains(f.ReplayCounts, e.ReplayCount)):
	default:
		return true
	}
	return false
}

// narrow cuts the ranges to the filter's partitions and offsets, so a scan
// reads no more than it must.
func (f Filter) narrow(rs []Range) []Range {
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

// Validate reports every problem of the filter at once.
func (f Filter) Validate() error { return errors.Join(f.problems()...) }

// String is the canonical text of the selection ("all" for the zero Filter).
func (f Filter) String() string { return f.key() }

// key is the canonical text of the selection: the same filter, however its
// lists were ordered or repeated, gives the same key.
func (f Filter) key() string {
	var parts []string
	add := func(name string, vals ...string) {
		vals = slices.DeleteFunc(slices.Compact(vals), func(v string) bool { return v == "" })
		if len(vals) > 0 {
			parts = append(parts, name+"="+strings.Join(vals, ","))
		}
	}
	add("class", sortedText(f.Classes, func(c Class) string { return string(c) })...)
	add("merchant", sortedText(f.Merchants, strings.Clone)...)
	add("event", sortedText(f.EventIDs, strings.Clone)...)
	add("since", f.Since.key())
	add("until", f.Until.key())
	add("partition", sortedText(f.Partitions, strconv.Itoa)...)
	if f.OffsetFrom > 0 {
		add("offset-from", strconv.FormatInt(f.OffsetFrom, 10))
	}
	if f.OffsetEnd > 0 {
		add("offset-to", strconv.FormatInt(f.OffsetEnd-1, 10))
	}
	add("replay-count", sortedText(f.ReplayCounts, strconv.Itoa)...)
	return cmp.Or(strings.Join(parts, " "), "all")
}

// sortedText sorts a copy of vs and renders each with text.
func sortedText[T cmp.Ordered](vs []T, text func(T) string) []string {
	out := make([]string, 0, len(vs))
	for _, v := range slices.Sorted(slices.Values(vs)) {
		out = append(out, text(v))
	}
	return out
}
