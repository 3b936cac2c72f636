package idgen

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
)

const (
	defaultLeaseTTL = 30 * time.Second
	minLeaseTTL     = 100 * time.Millisecond
	// maxStartWait bounds how long a new holder waits for its clock to pass
	// the previous holders' high-water mark; longer is a *StartWaitError.
	maxStartWait = 3 * time.Second
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	renewScript   = redis.NewScript(renewSrc)
	releaseScript = redis.NewScript(releaseSrc)
)

// Holder identifies a lease holder: stored in the lease value, named by a *HeldError.
type Holder struct {
	Pod   string    `json:"pod"`
	IP    string    `json:"ip"`
	Since time.Time `json:"since"`
}

// leaseValue is the lease key's value (JSON, so operators can read it with GET).
type leaseValue struct {
	Holder
	Token string `json:"token"`
}

// LeaseOptions tunes a Lease.
type LeaseOptions struct {
	TTL     time.Duration // of the lease key (default 30s, at least 100ms); Run renews at TTL/3
	Clock   Clock         // default SystemClock; a Generator using this lease shares it
	Metrics *Metrics      // nil: counted, not registered
}

// Lease is a worker ID leased in Redis (see the package doc). The generator
// reads only window, one atomic pointer: validity is a local deadline from
// the last successful renewal, not a Redis call per ID.
type Lease struct {
	rdb      redis.Scripter
	key      string
	hwmKey   string
	workerID int
	holder   Holder
	clock    Clock
	m        *Metrics
	logger   *zap.Logger

	ttl, renewEvery, retryEvery, margin time.Duration

	window  atomic.Pointer[window]    // nil: do not issue
	gen     atomic.Pointer[Generator] // the one generator gated by this lease
	running atomic.Bool
	done    chan struct{} // closed by Release: stops Run

	mu         sync.Mutex // serializes acquire, renew and release
	value      string     // lease value of the current holding; "" when not held
	token      string
	wroteToken string // token of our newest high-water-mark write
	minUnix    int64  // issue only timestamps after this (previous holders' mark)
	floorUnix  int64  // newest mark written by other holders before ours
	closed     bool
}

// window: issue while now is before validUntil and minMs < timestamp <= maxMs
// (ms since the epoch).
type window struct {
	validUntil   time.Time
	minMs, maxMs int64
}

// AcquireLease takes worker ID workerID for holder, or fails with a
// *HeldError naming the live holder (it never takes a lease over). If the
// previous holders' high-water mark is ahead of this clock it waits past it,
// up to 3s, else fails with a *StartWaitError. The lease is valid on return;
// call Run to keep it so, and Release (or end Run) to give it back. A nil
// logger means zap.NewNop().
func AcquireLease(ctx context.Context, rdb redis.Scripter, keys keyspace.Keyspace, workerID int, holder Holder, logger *zap.Logger, opts LeaseOptions) (*Lease, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("idgen: nil Redis client")
	case workerID < 0 || workerID > MaxWorker:
		return nil, fmt.Errorf("idgen: worker ID %d outside 0..%d", workerID, MaxWorker)
	case opts.TTL == 0:
		opts.TTL = defaultLeaseTTL
	case opts.TTL < minLeaseTTL:
		return nil, fmt.Errorf("idgen: lease TTL %v below %v", opts.TTL, minLeaseTTL)
	}
	opts.Clock, logger = cmp.Or(opts.Clock, SystemClock()), cmp.Or(logger, zap.NewNop())
	if opts.Metrics == nil {
		opts.Metrics, _ = NewMetrics(nil)
	}
	key := keys.WorkerLease(workerID)
	l := &Lease{
		rdb: rdb, key: key, hwmKey: hwmKeyOf(key), workerID: workerID, holder: holder,
		clock: opts.Clock, m: opts.Metrics, logger: logger,
		ttl: opts.TTL, renewEvery: opts.TTL / 3, retryEvery: opts.TTL / 10, margin: opts.TTL / 20,
		done: make(chan struct{}),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.acquireLocked(ctx); err != nil {
		return nil, err
	}
	if err := l.waitPastHighWater(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.renewEvery)
		defer cancel()
		return nil, errors.Join(err, l.releaseLocked(rctx))
	}
	l.logger.Info("idgen: worker lease acquired", l.fields()...)
	return l, nil
}

// hwmKeyOf names the high-water-mark hash of a lease key. Its hash tag is the
// whole lease key, so in a Redis Cluster one script may touch both.
func hwmKeyOf(leaseKey string) string { return leaseKey + ":hwm{" + leaseKey + "}" }

// Valid reports whether IDs may be issued now (for readiness probes).
func (l *Lease) Valid() bool {
	w := l.window.Load()
	return w != nil && l.clock.Now().Before(w.validUntil)
}

// waitPastHighWater waits, renewing, until the clock is past minUnix, or
// fails when that is further away than maxStartWait.
func (l *Lease) waitPastHighWater(ctx context.Context) error {
	target := time.UnixMilli(l.minUnix + 1)
	for waited := time.Duration(0); ; {
		wait := target.Sub(l.clock.Now())
		if wait <= 0 {
			return nil
		}
		if wait > maxStartWait || waited > maxStartWait {
			return &StartWaitError{WorkerID: l.workerID, HighWater: time.UnixMilli(l.minUnix), Wait: wait, Max: maxStartWait}
		}
		if waited == 0 {
			l.logger.Warn("idgen: waiting for the clock to pass the previous holder's high-water mark",
				zap.Time("high_water", time.UnixMilli(l.minUnix)), zap.Duration("wait", wait))
		}
		step := min(wait, l.renewEvery)
		select {
		case <-ctx.Done():
			return fmt.Errorf("idgen: waiting past high-water mark: %w", ctx.Err())
		case <-time.After(step):
		}
		waited += step
		if lost, err := l.renewLocked(ctx); err != nil {
			return err
		} else if lost {
			return fmt.Errorf("%w: worker %d lost while waiting past the high-water mark", ErrLeaseNotValid, l.workerID)
		}
	}
}

// Run keeps the lease: it renews at TTL/3 (retrying failures at TTL/10; if
// none succeeds before the local deadline, issuance stops by itself), and
// after a loss re-acquires the worker ID as soon as it is free. It returns
// when ctx ends, after releasing the lease, or when Release is called.
func (l *Lease) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("idgen: Lease.Run called twice")
	}
	timer := time.NewTimer(l.renewEvery)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.renewEvery)
			defer cancel()
			err := l.Release(rctx)
			if errors.Is(err, ErrLeaseNotHeld) {
				l.logger.Warn("idgen: lease was no longer ours at shutdown", zap.Error(err))
				return nil
			}
			return err
		case <-l.done:
			return nil
		case <-timer.C:
		}
		timer.Reset(l.tick(ctx))
	}
}

// tick renews or re-acquires once and says when to come back.
func (l *Lease) tick(ctx context.Context) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.renewEvery
	}
	ctx, cancel := context.WithTimeout(ctx, l.renewEvery)
	defer cancel()
	if l.value != "" {
		lost, err := l.renewLocked(ctx)
		switch {
		case err != nil:
			l.m.renewError.Inc()
			var until time.Time
			if w := l.window.Load(); w != nil {
				until = w.validUntil
			}
			l.logger.Warn("idgen: lease renewal failed; retrying", zap.Error(err), zap.Time("valid_until", until))
			return l.retryEvery
		case !lost:
			return l.renewEvery
		}
		l.m.renewLost.Inc()
		l.window.Store(nil)
		l.value = ""
		l.logger.Error("idgen: worker lease lost (key gone or taken); ID issuance stopped until re-acquired")
	}
	err := l.acquireLocked(ctx)
	switch {
	case err == nil:
		l.logger.Info("idgen: worker lease re-acquired; ID issuance resumes", l.fields()...)
		return l.renewEvery
	case errors.Is(err, ErrWorkerHeld):
		l.logger.Warn("idgen: worker lease held by another holder; will retry", zap.Error(err))
		return l.renewEvery
	default:
		l.logger.Warn("idgen: worker lease re-acquisition failed; will retry", zap.Error(err))
		return l.retryEvery
	}
}

// Release stops issuance, gives the lease back and stops Run. It leaves as
// high-water mark the newest millisecond the generator reserved (or the
// previous holders' mark), so the next holder need not wait out our TTL.
// Calling it again is a no-op.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return l.releaseLocked(ctx)
}

// The three Redis steps of a holding follow; callers hold l.mu.

// acquireLocked runs the acquire script and, on success, publishes a window
// that starts after the previous holders' high-water mark.
func (l *Lease) acquireLocked(ctx context.Context) error {
	token := rand.Text()
	raw, err := json.Marshal(leaseValue{Holder: l.holder, Token: token})
	if err != nil {
		return fmt.Errorf("idgen: encode lease value: %w", err)
	}
	sent := l.clock.Now()
	res, err := acquireScript.Run(ctx, l.rdb, []string{l.key, l.hwmKey},
		string(raw), l.ttl.Milliseconds(), sent.UnixMilli(), token).Slice()
	if err != nil {
		return fmt.Errorf("idgen: acquire worker %d: %w", l.workerID, err)
	}
	if len(res) == 3 && res[0] == int64(0) {
		held, _ := res[1].(string)
		pttl, _ := res[2].(int64)
		var v leaseValue
		_ = json.Unmarshal([]byte(held), &v) // unparsable: the error shows Raw instead
		return &HeldError{WorkerID: l.workerID, Holder: v.Holder, Raw: held, ExpiresIn: time.Duration(pttl) * time.Millisecond}
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

// renewLocked extends the lease and the high-water mark. lost is true when
// the key is gone or not ours.
func (l *Lease) renewLocked(ctx context.Context) (lost bool, err error) {
	sent := l.clock.Now()
	res, err := renewScript.Run(ctx, l.rdb, []string{l.key, l.hwmKey},
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

// releaseLocked stops issuance and gives the lease back (see Release).
func (l *Lease) releaseLocked(ctx context.Context) error {
	// Invalidate first, then read the generator's state: a call that saw the
	// window valid reserved its millisecond before this point (see
	// Generator.reserve), so lastMs covers it.
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
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.key, l.hwmKey}, value, mark, l.token).Int()
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

func (l *Lease) fields() []zap.Field {
	return []zap.Field{zap.String("pod", l.holder.Pod), zap.String("ip", l.holder.IP),
		zap.Time("since", l.holder.Since), zap.Int64("min_unix_ms", l.minUnix)}
}

// replyInt parses the scripts' numbers (formatted as strings, beyond Lua's integer range).
func replyInt(v any) (int64, error) {
	s, _ := v.(string)
	return strconv.ParseInt(s, 10, 64)
}
