package idgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
)

// Defaults of LeaseOptions.
const (
	DefaultLeaseTTL     = 30 * time.Second
	DefaultMaxStartWait = 3 * time.Second
	minLeaseTTL         = 100 * time.Millisecond
)

// Holder identifies a lease holder; it is stored in the lease value and named
// in the error a refused start returns.
type Holder struct {
	Pod   string    `json:"pod"`
	IP    string    `json:"ip"`
	Since time.Time `json:"since"`
}

// leaseValue is the lease key's value: the holder and the random token of
// this holding (JSON, so operators can read it with GET).
type leaseValue struct {
	Holder
	Token string `json:"token"`
}

// LeaseOptions tunes a Lease.
type LeaseOptions struct {
	// TTL of the lease key (default 30s, at least 100ms). Run renews at TTL/3.
	TTL time.Duration
	// MaxStartWait bounds how long a new holder waits for its clock to pass
	// the previous holders' high-water mark (default 3s); a longer wait is a
	// *StartWaitError.
	MaxStartWait time.Duration
	// Clock defaults to SystemClock; a Generator using this lease shares it.
	Clock Clock
	// Metrics may be nil (counted, not registered).
	Metrics *Metrics
}

// Lease is a worker ID leased in Redis. See the package doc for the protocol.
//
// The hot path (Generator.NextID) reads only window, one atomic pointer:
// validity is a local deadline computed from the last successful renewal, not
// a Redis call per ID.
type Lease struct {
	rdb      redis.Scripter
	key      string
	hwmKey   string
	workerID int
	holder   Holder
	clock    Clock
	m        *Metrics
	logger   *zap.Logger

	acquire, renew, release *redis.Script // lease_protocol.go

	ttl, renewEvery, retryEvery, margin, maxStartWait time.Duration

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

// window is what the generator checks on every call: issue while now is
// before validUntil and minMs < timestamp <= maxMs (ms since the epoch).
type window struct {
	validUntil   time.Time
	minMs, maxMs int64
}

// AcquireLease takes worker ID workerID for holder, or fails with a
// *HeldError naming the live holder (it never takes a lease over). If the
// previous holders' high-water mark is ahead of this clock it waits past it,
// up to opts.MaxStartWait, else fails with a *StartWaitError. The lease is
// valid on return; call Run to keep it so, and Release (or end Run) to give
// it back.
func AcquireLease(ctx context.Context, rdb redis.Scripter, keys keyspace.Keyspace, workerID int, holder Holder, logger *zap.Logger, opts LeaseOptions) (*Lease, error) {
	l, err := newLease(rdb, keys, workerID, holder, logger, opts)
	if err != nil {
		return nil, err
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

func newLease(rdb redis.Scripter, keys keyspace.Keyspace, workerID int, holder Holder, logger *zap.Logger, opts LeaseOptions) (*Lease, error) {
	if rdb == nil {
		return nil, errors.New("idgen: nil Redis client")
	}
	if workerID < 0 || workerID > MaxWorker {
		return nil, fmt.Errorf("idgen: worker ID %d outside 0..%d", workerID, MaxWorker)
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultLeaseTTL
	}
	if opts.TTL < minLeaseTTL {
		return nil, fmt.Errorf("idgen: lease TTL %v below %v", opts.TTL, minLeaseTTL)
	}
	if opts.MaxStartWait == 0 {
		opts.MaxStartWait = DefaultMaxStartWait
	}
	if opts.MaxStartWait < 0 {
		return nil, errors.New("idgen: negative MaxStartWait")
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock()
	}
	if opts.Metrics == nil {
		opts.Metrics = unregisteredMetrics()
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if holder.Since.IsZero() {
		holder.Since = opts.Clock.Now()
	}
	key := keys.WorkerLease(workerID)
	return &Lease{
		rdb:          rdb,
		acquire:      redis.NewScript(acquireSrc),
		renew:        redis.NewScript(renewSrc),
		release:      redis.NewScript(releaseSrc),
		key:          key,
		hwmKey:       hwmKeyOf(key),
		workerID:     workerID,
		holder:       holder,
		clock:        opts.Clock,
		m:            opts.Metrics,
		logger:       logger.With(zap.Int("worker_id", workerID)),
		ttl:          opts.TTL,
		renewEvery:   opts.TTL / 3,
		retryEvery:   opts.TTL / 10,
		margin:       opts.TTL / 20,
		maxStartWait: opts.MaxStartWait,
		done:         make(chan struct{}),
	}, nil
}

// hwmKeyOf names the high-water-mark hash of a lease key. Its hash tag is the
// whole lease key, so in a Redis Cluster both keys share a slot and one
// script may touch both (a key without braces hashes as a whole).
func hwmKeyOf(leaseKey string) string { return leaseKey + ":hwm{" + leaseKey + "}" }

// WorkerID is the leased worker ID.
func (l *Lease) WorkerID() int { return l.workerID }

// Holder is this lease's holder identity.
func (l *Lease) Holder() Holder { return l.holder }

// Valid reports whether IDs may be issued now (for readiness probes).
func (l *Lease) Valid() bool {
	w := l.window.Load()
	return w != nil && l.clock.Now().Before(w.validUntil)
}

// waitPastHighWater waits (renewing) until the clock is past minUnix, or
// fails when that is further away than maxStartWait.
func (l *Lease) waitPastHighWater(ctx context.Context) error {
	target := time.UnixMilli(l.minUnix + 1)
	wait := target.Sub(l.clock.Now())
	if wait <= 0 {
		return nil
	}
	if wait > l.maxStartWait {
		return &StartWaitError{WorkerID: l.workerID, HighWater: time.UnixMilli(l.minUnix), Wait: wait, Max: l.maxStartWait}
	}
	l.logger.Warn("idgen: waiting for the clock to pass the previous holder's high-water mark",
		zap.Time("high_water", time.UnixMilli(l.minUnix)), zap.Duration("wait", wait))
	for waited := time.Duration(0); ; {
		remaining := target.Sub(l.clock.Now())
		if remaining <= 0 {
			return nil
		}
		if waited > l.maxStartWait {
			return &StartWaitError{WorkerID: l.workerID, HighWater: time.UnixMilli(l.minUnix), Wait: remaining, Max: l.maxStartWait}
		}
		step := min(remaining, l.renewEvery)
		select {
		case <-ctx.Done():
			return fmt.Errorf("idgen: waiting past high-water mark: %w", ctx.Err())
		case <-time.After(step):
		}
		waited += step
		lost, err := l.renewLocked(ctx)
		if err != nil {
			return err
		}
		if lost {
			return fmt.Errorf("%w: worker %d lost while waiting past the high-water mark", ErrLeaseNotValid, l.workerID)
		}
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

func (l *Lease) fields() []zap.Field {
	return []zap.Field{
		zap.String("pod", l.holder.Pod),
		zap.String("ip", l.holder.IP),
		zap.Time("since", l.holder.Since),
		zap.Int64("min_unix_ms", l.minUnix),
	}
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("idgen: random token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
