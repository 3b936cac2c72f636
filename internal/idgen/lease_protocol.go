package idgen

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// The three Redis steps of a holding: acquire, renew, release. Callers hold l.mu.

//go:embed acquire.lua
var acquireSrc string

// acquireLocked runs the acquire script and, on success, publishes a window
// that starts after the previous holders' high-water mark.
func (l *Lease) acquireLocked(ctx context.Context) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(leaseValue{Holder: l.holder, Token: token})
	if err != nil {
		return fmt.Errorf("idgen: encode lease value: %w", err)
	}
	sent := l.clock.Now()
	res, err := l.acquire.Run(ctx, l.rdb, []string{l.key, l.hwmKey},
		string(raw), l.ttl.Milliseconds(), sent.UnixMilli(), token).Slice()
	if err != nil {
		return fmt.Errorf("idgen: acquire worker %d: %w", l.workerID, err)
	}
	if len(res) < 3 {
		return fmt.Errorf("idgen: acquire worker %d: unexpected reply %v", l.workerID, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return l.heldError(res)
	}
	if len(res) != 4 {
		return fmt.Errorf("idgen: acquire worker %d: unexpected reply %v", l.workerID, res)
	}
	prev, err1 := replyInt(res[1])
	by, _ := res[2].(string)
	hwm, err2 := replyInt(res[3])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("idgen: acquire worker %d: %w", l.workerID, err)
	}
	if by == "" || by != l.wroteToken {
		// Another holder wrote the mark: our IDs must come after it. (If we
		// wrote it ourselves, our generator's own order already suffices.)
		l.floorUnix = max(l.floorUnix, prev)
		l.minUnix = max(l.minUnix, prev)
	}
	l.value, l.token, l.wroteToken = string(raw), token, token
	l.publish(sent, hwm)
	l.m.leaseAcquired.Inc()
	return nil
}

func (l *Lease) heldError(res []any) error {
	raw, _ := res[1].(string)
	pttl, _ := res[2].(int64)
	var v leaseValue
	_ = json.Unmarshal([]byte(raw), &v) // unparsable: the error shows Raw instead
	return &HeldError{WorkerID: l.workerID, Holder: v.Holder, Raw: raw, ExpiresIn: time.Duration(pttl) * time.Millisecond}
}

//go:embed renew.lua
var renewSrc string

// renewLocked extends the lease and the high-water mark. lost is true when
// the key is gone or not ours.
func (l *Lease) renewLocked(ctx context.Context) (lost bool, err error) {
	sent := l.clock.Now()
	res, err := l.renew.Run(ctx, l.rdb, []string{l.key, l.hwmKey},
		l.value, l.ttl.Milliseconds(), sent.UnixMilli(), l.token).Text()
	if err != nil {
		return false, fmt.Errorf("idgen: renew worker %d: %w", l.workerID, err)
	}
	if res == "" {
		return true, nil
	}
	hwm, err := replyInt(res)
	if err != nil {
		return false, fmt.Errorf("idgen: renew worker %d: %w", l.workerID, err)
	}
	l.publish(sent, hwm)
	return false, nil
}

// publish makes the holding usable until sent+TTL-margin (sent is read
// before the request, so Redis's own expiry comes later; the margin absorbs
// clock-rate drift) for timestamps up to hwm, which is already in Redis.
func (l *Lease) publish(sent time.Time, hwmUnix int64) {
	l.window.Store(&window{
		validUntil: sent.Add(l.ttl - l.margin),
		minMs:      l.minUnix - EpochUnixMilli,
		maxMs:      hwmUnix - EpochUnixMilli,
	})
}

//go:embed release.lua
var releaseSrc string

// releaseLocked stops issuance and gives the lease back (see Release).
func (l *Lease) releaseLocked(ctx context.Context) error {
	// Invalidate first, then read the generator's state: a call that saw the
	// window valid reserved its millisecond before this point (Generator.reserve
	// checks the window is unchanged after its compare-and-swap), so lastMs
	// covers it.
	l.window.Store(nil)
	if l.value == "" {
		return nil
	}
	value := l.value
	l.value = ""
	mark := l.floorUnix
	if g := l.gen.Load(); g != nil {
		if ms := g.lastMs(); ms >= 0 {
			mark = max(mark, ms+EpochUnixMilli)
		}
	}
	n, err := l.release.Run(ctx, l.rdb, []string{l.key, l.hwmKey}, value, mark, l.token).Int()
	if err != nil {
		return fmt.Errorf("idgen: release worker %d: %w", l.workerID, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: worker %d", ErrLeaseNotHeld, l.workerID)
	}
	l.wroteToken = l.token
	l.logger.Info("idgen: worker lease released", zap.Time("high_water", time.UnixMilli(mark)))
	return nil
}

func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	default:
		return 0, fmt.Errorf("unexpected reply %v (%T)", v, v)
	}
}
