package reconcile

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Fields of the quota hash (DESIGN.md, "Redis keys").
const (
	fieldRemain   = "remain"
	fieldVer      = "ver"
	pendingPrefix = "p:"
)

// pendingEntry is one p:<event_id> field: "<amount>:<unix_ms>", a deduction
// done in Redis and not yet confirmed in MySQL, with the time it was made.
type pendingEntry struct {
	Field   string
	EventID string
	Amount  int64
	At      time.Time
}

// quotaHash is a parsed HGETALL of a quota key.
type quotaHash struct {
	Exists   bool // remain is present
	Leftover int  // fields of a hash without remain (hydration drops them)
	Remain   int64
	Ver      string // as stored; "" when absent
	Pending  []pendingEntry
}

// parseQuota parses an HGETALL result. A hash without remain is missing, as
// the worker sees it. Unknown fields are ignored; a non-integer remain and an
// unparsable pending value are errors (the merchant is reported as malformed).
func parseQuota(h map[string]string) (quotaHash, error) {
	raw, ok := h[fieldRemain]
	if !ok {
		return quotaHash{Leftover: len(h)}, nil
	}
	q := quotaHash{Exists: true, Ver: h[fieldVer]}
	remain, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return q, fmt.Errorf("%s=%q is not an integer", fieldRemain, raw)
	}
	q.Remain = remain
	for field, value := range h {
		id, ok := strings.CutPrefix(field, pendingPrefix)
		if !ok {
			continue
		}
		p, err := parsePending(field, id, value)
		if err != nil {
			return q, err
		}
		q.Pending = append(q.Pending, p)
	}
	sort.Slice(q.Pending, func(i, j int) bool { return q.Pending[i].EventID < q.Pending[j].EventID })
	return q, nil
}

func parsePending(field, id, value string) (pendingEntry, error) {
	amountRaw, msRaw, ok := strings.Cut(value, ":")
	amount, aerr := strconv.ParseInt(amountRaw, 10, 64)
	ms, merr := strconv.ParseInt(msRaw, 10, 64)
	if !ok || id == "" || aerr != nil || merr != nil || amount <= 0 || ms <= 0 {
		return pendingEntry{}, fmt.Errorf("%s=%q is not <amount>:<unix_ms>", field, value)
	}
	return pendingEntry{Field: field, EventID: id, Amount: amount, At: time.UnixMilli(ms)}, nil
}

// pendingIDs lists the event ids of every pending field.
func (q quotaHash) pendingIDs() []string {
	ids := make([]string, len(q.Pending))
	for i, p := range q.Pending {
		ids[i] = p.EventID
	}
	return ids
}
