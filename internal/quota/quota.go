// Package quota owns a merchant's quota hash in Redis (keyspace.Quota):
//
//	remain        what the merchant may still use, as far as Redis knows
//	ver           bumped by every mutation (hydration sets it to the time in
//	              µs, so a re-created hash never repeats an earlier ver)
//	p:<event_id>  "<amount>:<unix_ms>": a deduction not yet confirmed in
//	              MySQL, and when it was made
//	floor         how far below zero the overdraft policy lets remain go:
//	              N, or "inf" (overage); absent: 0 (reject). Set at hydration.
//	shards        the shard count of the layout a rebalance wrote the hash
//	              for; absent: 1. A deduction routed by another count finds
//	              it is not its event's shard, and goes to the wide pass.
//
// A hash without remain is missing: unknown, never zero. The write path's and
// the reconciler's scripts write it only while the caller's token is in the
// merchant lock (keyspace.Lock): fencing.
package quota

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Field names of the hash; a pending field is PendingField(eventID).
const (
	FieldRemain   = "remain"
	FieldVer      = "ver"
	FieldFloor    = "floor"
	FieldShards   = "shards"
	pendingPrefix = "p:"
)

// PendingField names the field of eventID's unconfirmed deduction.
func PendingField(eventID string) string { return pendingPrefix + eventID }

// FormatPending renders a pending field's value: "<amount>:<unix_ms>", as the
// deduction script writes it.
func FormatPending(amount int64, at time.Time) string {
	return strconv.FormatInt(amount, 10) + ":" + strconv.FormatInt(at.UnixMilli(), 10)
}

// Pending is one unconfirmed deduction.
type Pending struct {
	EventID string
	Amount  int64
	At      time.Time
}

// Hash is a parsed quota hash.
type Hash struct {
	Exists   bool // remain is present; without it the hash is missing
	Leftover int  // fields of a missing hash (hydration drops them)
	Remain   int64
	Ver      string    // as stored; "" when absent
	Pending  []Pending // sorted by event id
}

// Parse reads an HGETALL of a quota hash, ignoring unknown fields; a bad
// remain or pending value (not "<amount>:<unix_ms>", both positive) is an error.
func Parse(h map[string]string) (Hash, error) {
	raw, ok := h[FieldRemain]
	if !ok {
		return Hash{Leftover: len(h)}, nil
	}
	q := Hash{Exists: true, Ver: h[FieldVer]}
	var err error
	if q.Remain, err = strconv.ParseInt(raw, 10, 64); err != nil {
		return q, fmt.Errorf("quota: %s=%q is not an integer", FieldRemain, raw)
	}
	for field, value := range h {
		id, ok := strings.CutPrefix(field, pendingPrefix)
		if !ok {
			continue
		}
		amount, ms, ok := strings.Cut(value, ":")
		a, aerr := strconv.ParseInt(amount, 10, 64)
		t, terr := strconv.ParseInt(ms, 10, 64)
		if !ok || id == "" || aerr != nil || terr != nil || a <= 0 || t <= 0 {
			return q, fmt.Errorf("quota: %s=%q is not <amount>:<unix_ms>", field, value)
		}
		q.Pending = append(q.Pending, Pending{EventID: id, Amount: a, At: time.UnixMilli(t).UTC()})
	}
	sort.Slice(q.Pending, func(i, j int) bool { return q.Pending[i].EventID < q.Pending[j].EventID })
	return q, nil
}

// readChunk bounds the commands of one pipeline.
const readChunk = 1000

// Read returns the HGETALL of each key, in order, pipelined; a missing key
// reads as an empty map.
func Read(ctx context.Context, rdb Client, keys []string) ([]map[string]string, error) {
	out := make([]map[string]string, 0, len(keys))
	for start := 0; start < len(keys); start += readChunk {
		pipe := rdb.Pipeline()
		part := keys[start:min(start+readChunk, len(keys))]
		cmds := make([]*redis.MapStringStringCmd, len(part))
		for i, k := range part {
			cmds[i] = pipe.HGetAll(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("quota: read %d hashes: %w", len(part), err)
		}
		for _, c := range cmds {
			out = append(out, c.Val())
		}
	}
	return out, nil
}

// Merge reads a sharded merchant's hashes (HGETALLs) as one: remain summed
// (missing when a shard's is), every pending field, no ver. One hash is itself.
func Merge(hs []map[string]string) map[string]string {
	if len(hs) == 1 {
		return hs[0]
	}
	out := make(map[string]string)
	var sum int64
	whole := true
	for _, h := range hs {
		v, err := strconv.ParseInt(h[FieldRemain], 10, 64)
		if err != nil {
			whole = false
		}
		sum += v
		for f, val := range h {
			if f != FieldRemain && f != FieldVer {
				out[f] = val
			}
		}
	}
	if whole {
		out[FieldRemain] = strconv.FormatInt(sum, 10)
	}
	return out
}
