// Package lock is the per-merchant Redis lock of the billing write path.
//
// A Lock holds one or more keys (a batch's merchants; one key is a batch of
// one), each set with PX to the Lock's random token. Every script compares the
// token first, so a holder never touches a key it does not hold, and the token
// is the fencing token: a script that checks GET(key) == Token() in the same
// call as its write cannot be run by a holder that lost the key.
//
// It is a single-instance Redis lock (no Redlock): a failover that loses a
// key can let two holders overlap. Fencing and the ledger's unique constraint
// are the floor.
package lock

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

var (
	// ErrNotObtained means a key is held by someone else. Wait wraps it
	// together with the context's error when it gives up.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrNotHeld means a key is no longer ours: released, expired, deleted or
	// taken by another holder. It was not touched.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost is the cause (context.Cause) of a Lock's Context that ended
	// because a key was lost while held.
	ErrLost = errors.New("lock: lost")
	// ErrClosed is returned by a Client after Close.
	ErrClosed = errors.New("lock: client closed")
)

const (
	// Wait tries again after a jittered delay that doubles from pollMin up to
	// pollMax. BenchmarkContention weighed it against release notifications.
	pollMin, pollMax = time.Millisecond, 10 * time.Millisecond
	// abandonTimeout bounds giving back the keys of a failed or abandoned try.
	abandonTimeout = time.Second
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// Metrics receives the lock's metrics; nil means unregistered collectors.
	Metrics *Metrics
	// Logger logs lost locks and Redis errors; nil means zap.NewNop().
	Logger *zap.Logger
}

// Redis is what a Client needs of a client: *redis.Client, or
// *redis.ClusterClient (a batch's keys then lie in many slots).
type Redis interface {
	Pipeline() redis.Pipeliner
}

// Client obtains locks on a single Redis or a Redis Cluster.
type Client struct {
	rdb     Redis
	opts    Options
	scripts scripts
	stop    chan struct{} // closed by Close
	close   sync.Once
}

// New returns a Client on rdb. rdb must honour context
// deadlines (go-redis: ContextTimeoutEnabled, which dial.Redis sets): every
// call that takes or renews a lock is bounded by the lock's expiry, and a
// client that ignores the bound keeps waiting on a silent Redis after another
// holder may have taken the lock.
func New(rdb Redis, opts Options) (*Client, error) {
	if rdb == nil {
		return nil, errors.New("lock: nil redis client")
	}
	if opts.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		opts.Metrics = m
	}
	opts.Logger = cmp.Or(opts.Logger, zap.NewNop())
	return &Client{rdb: rdb, opts: opts, scripts: newScripts(), stop: make(chan struct{})}, nil
}

// Close makes waits in progress and later calls return ErrClosed. Locks
// already held keep working. It does not close rdb.
func (c *Client) Close() error {
	c.close.Do(func() { close(c.stop) })
	return nil
}

// Obtain tries once, in one round trip, to take the lock at key for ttl:
// Wait without the waiting. It returns ErrNotObtained when someone else holds
// the key.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	l, err := c.take(ctx, []string{key}, ttl, false)
	c.opts.Metrics.obtain.WithLabelValues(modeTry, resultOf(err)).Inc()
	return l, err
}

// Wait takes the locks at keys (distinct) for ttl (at least 1ms, in whole
// milliseconds), waiting while others hold some, until ctx ends. It returns
// one Lock for all of them, or an error and holds none; when ctx ends the
// error is both ErrNotObtained and ctx.Err().
//
// It takes the keys in sorted order and stops at the first one held by
// someone else: it holds no key beyond the one it waits for, so callers whose
// sets overlap never wait for one another in a cycle. It tries again after a
// jittered backoff, renewing the keys it holds with each try. Uncontended it
// costs one round trip for any number of keys (on a Cluster one per node).
//
// The Lock lives until Release or until ctx ends (see Lock.Context).
func (c *Client) Wait(ctx context.Context, keys []string, ttl time.Duration) (*Lock, error) {
	start := time.Now()
	l, err := c.take(ctx, keys, ttl, true)
	res := resultOf(err)
	c.opts.Metrics.obtain.WithLabelValues(modeWait, res).Inc()
	c.opts.Metrics.wait.WithLabelValues(res).Observe(time.Since(start).Seconds())
	return l, err
}

func (c *Client) take(ctx context.Context, keys []string, ttl time.Duration, wait bool) (*Lock, error) {
	sorted := slices.Sorted(slices.Values(keys))
	switch {
	case ttl < time.Millisecond:
		return nil, fmt.Errorf("lock: ttl %v is below 1ms", ttl)
	case len(keys) == 0 || sorted[0] == "":
		return nil, errors.New("lock: no key, or an empty one")
	case len(slices.Compact(slices.Clone(sorted))) != len(keys):
		return nil, fmt.Errorf("lock: a key listed twice in %v", keys)
	case c.closed():
		return nil, ErrClosed
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("lock: token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	retry := backoff.NewExponentialBackOff(backoff.WithInitialInterval(pollMin),
		backoff.WithMultiplier(2), backoff.WithMaxInterval(pollMax), backoff.WithMaxElapsedTime(0))
	for {
		sent := time.Now()
		n, err := c.try(ctx, sorted, token, ttl, sent)
		if err == nil && n == len(keys) {
			return newLock(ctx, c, keys, token, ttl, sent), nil
		}
		if err == nil && wait {
			if err = c.sleep(ctx, retry.NextBackOff()); err == nil {
				continue
			}
		}
		if err != nil || n > 0 {
			c.abandon(ctx, sorted, token)
		}
		if err == nil {
			err = ErrNotObtained
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ErrNotObtained, ctx.Err())
		}
		return nil, err
	}
}

// try runs obtain.lua on the keys, sorted, and returns how many of them,
// from the first, are ours. On a Cluster each key is tried on its own, so
// keys beyond the first one held by someone else may have been taken: they
// are given back at once.
func (c *Client) try(ctx context.Context, keys []string, token string, ttl time.Duration, sent time.Time) (int, error) {
	// A reply later than the keys' expiry is worthless: they may be someone
	// else's by then.
	ctx, cancel := context.WithDeadline(ctx, expiry(ttl, sent))
	defer cancel()
	ours, err := c.eval(ctx, c.scripts.obtain, keys, token, ttl.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("lock: obtain %s: %w", keys[0], err)
	}
	n := slices.Index(ours, 0)
	if n < 0 {
		return len(keys), nil
	}
	if slices.Contains(ours[n:], 1) {
		c.abandon(ctx, keys[n:], token)
	}
	return n, nil
}

// abandon deletes those of keys that hold token, even after ctx ended: what
// it misses expires with the TTL.
func (c *Client) abandon(ctx context.Context, keys []string, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if _, err := c.eval(ctx, c.scripts.release, keys, token); err != nil {
		c.opts.Logger.Warn("lock: give back keys", zap.Strings("keys", keys), zap.Error(err))
	}
}

// sleep waits for d, or returns ErrNotObtained when ctx ends first and
// ErrClosed when the Client is closed.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ErrNotObtained
	case <-c.stop:
		return ErrClosed
	}
}

func (c *Client) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// Lock is one acquisition of one or more keys. A watchdog goroutine, owned
// like an etcd session's keep-alive, renews every key every TTL/3 with the
// token-checked script until the Lock's Context ends; Release waits for it.
//
// Context ends on Release, when the ctx the Lock was obtained with ends (the
// keys then expire within the TTL), and when a key is lost: found not ours by
// a renewal (so within TTL/3 plus one round trip), or not renewed before it
// would expire. Each renewal is bounded by that expiry (TTL after the last
// successful renewal was sent, less a drift allowance), and Redis errors are
// retried with backoff until then, so the holder knows before Redis could let
// another holder in.
type Lock struct {
	c     *Client
	keys  []string
	token string
	ttl   time.Duration

	ctx       context.Context
	cancel    context.CancelCauseFunc
	done      chan struct{} // closed when the watchdog has exited
	renewedAt time.Time     // when the last successful obtain or renewal was sent
	lost      bool          // set by the watchdog, then (once done is closed) by Release

	mu       sync.Mutex
	released bool // a Release succeeded or is in flight
}

func newLock(ctx context.Context, c *Client, keys []string, token string, ttl time.Duration, sent time.Time) *Lock {
	l := &Lock{c: c, keys: slices.Clone(keys), token: token, ttl: ttl, renewedAt: sent, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	go l.watch()
	return l
}

// Keys are the Lock's keys, in the order they were asked for.
func (l *Lock) Keys() []string { return slices.Clone(l.keys) }

// Token is the random value of every key while this Lock holds it: the
// fencing token.
func (l *Lock) Token() string { return l.token }

// Context is the context to do the locked work under: it ends when the Lock
// is lost (cause: an error wrapping ErrLost, naming the key), released, or
// no longer renewed.
func (l *Lock) Context() context.Context { return l.ctx }

// Release stops the watchdog, waits for it to exit (which ends Context), and
// deletes every key that is still ours in one round trip. It returns
// ErrNotHeld, deleting the others, when a key was not ours. After a Redis
// error keys may still be held; they are no longer renewed, so they expire
// within the TTL, and Release may be retried.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return ErrNotHeld
	}
	l.released = true
	l.mu.Unlock()
	l.cancel(nil)
	<-l.done
	ours, err := l.c.eval(ctx, l.c.scripts.release, l.keys, l.token)
	if err != nil {
		l.mu.Lock()
		l.released = false
		l.mu.Unlock()
		return fmt.Errorf("lock: release %s: %w", l.keys[0], err)
	}
	if i := slices.Index(ours, 0); i >= 0 {
		err := fmt.Errorf("lock: release %s: %w", l.keys[i], ErrNotHeld)
		l.lose(reasonNotHeld, err)
		return err
	}
	return nil
}

func (l *Lock) watch() {
	defer close(l.done)
	retry := backoff.NewExponentialBackOff(backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMultiplier(2), backoff.WithMaxInterval(max(l.ttl/9, 10*time.Millisecond)), backoff.WithMaxElapsedTime(0))
	timer := time.NewTimer(time.Until(l.renewedAt.Add(l.ttl / 3)))
	defer timer.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-timer.C:
		}
		err := l.renew()
		switch {
		case l.ctx.Err() != nil:
			return // stopped, or renew found a key lost
		case err == nil:
			retry.Reset()
			timer.Reset(time.Until(l.renewedAt.Add(l.ttl / 3)))
			continue
		}
		l.c.opts.Metrics.renewErrors.Inc()
		left := time.Until(expiry(l.ttl, l.renewedAt))
		if left <= 0 {
			l.lose(reasonExpired, fmt.Errorf("not renewed before expiry: %w", err))
			return
		}
		l.c.opts.Logger.Warn("lock renew failed, retrying",
			zap.Strings("keys", l.keys), zap.Duration("left", left), zap.Error(err))
		timer.Reset(min(retry.NextBackOff(), left))
	}
}

// renew extends every key, giving up when they would have expired anyway.
func (l *Lock) renew() error {
	ctx, cancel := context.WithDeadline(l.ctx, expiry(l.ttl, l.renewedAt))
	defer cancel()
	sent := time.Now()
	ours, err := l.c.eval(ctx, l.c.scripts.refresh, l.keys, l.token, l.ttl.Milliseconds())
	if err != nil {
		return fmt.Errorf("lock: refresh %s: %w", l.keys[0], err)
	}
	if i := slices.Index(ours, 0); i >= 0 {
		l.lose(reasonNotHeld, fmt.Errorf("%s: %w", l.keys[i], ErrNotHeld))
		return ErrNotHeld
	}
	l.renewedAt = sent
	return nil
}

// lose records the first loss of a held key: it counts it (before anyone is
// told, so whoever sees the loss sees it counted), logs it, and ends Context
// with a cause wrapping ErrLost.
func (l *Lock) lose(reason string, err error) {
	if l.lost {
		return
	}
	l.lost = true
	l.c.opts.Metrics.lost.WithLabelValues(reason).Inc()
	l.c.opts.Logger.Warn("lock lost", zap.Strings("keys", l.keys), zap.String("reason", reason), zap.Error(err))
	l.cancel(fmt.Errorf("%w: %w", ErrLost, err))
}

// expiry is when keys set or renewed for ttl by a call sent at sent must be
// assumed expired: Redis expires them ttl after it ran the call, so no
// earlier than sent+ttl by its clock; 1% and 2ms (as Redlock) allow for drift
// between this clock and Redis's. A call that guards a lock is bounded by it:
// a reply later than that is worthless.
func expiry(ttl time.Duration, sent time.Time) time.Time {
	return sent.Add(ttl - ttl/100 - 2*time.Millisecond)
}

var (
	//go:embed obtain.lua
	obtainLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed release.lua
	releaseLua string
)

// scripts are the token-checked Lua scripts; each takes any number of keys
// and answers 1 or 0 per key.
type scripts struct {
	obtain, refresh, release *redis.Script
}

func newScripts() scripts {
	return scripts{
		obtain:  redis.NewScript(obtainLua),
		refresh: redis.NewScript(refreshLua),
		release: redis.NewScript(releaseLua),
	}
}

// eval runs script on keys with args and returns its answer per key (0 for
// keys after one obtain.lua stopped at). On a single Redis that is one call.
// On a Cluster, where one call may only touch keys of one slot and a batch's
// keys lie in many, it is one call per key, in one pipeline (quota.Run: split
// by node, EVALSHA with EVAL where a node has not cached the script).
func (c *Client) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	calls := []*quota.Call{{Script: script, Keys: keys, Args: args}}
	if _, single := c.rdb.(*redis.Client); !single {
		calls = make([]*quota.Call, len(keys))
		for i, key := range keys {
			calls[i] = &quota.Call{Script: script, Keys: []string{key}, Args: args}
		}
	}
	quota.Run(ctx, c.rdb, calls...)
	out := make([]int64, 0, len(keys))
	for _, call := range calls {
		res, err := call.Cmd.Int64Slice()
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return append(out, make([]int64, len(keys)-len(out))...), nil
}

// Result and reason label values.
const (
	resultObtained    = "obtained"
	resultNotObtained = "not_obtained"
	resultError       = "error"

	modeTry  = "try"
	modeWait = "wait"

	reasonNotHeld = "not_held" // a token check found the key gone or someone else's
	reasonExpired = "expired"  // Redis could not be reached to renew before the TTL ran out
)

// Metrics are the lock's Prometheus collectors. Labels never carry a key or a
// merchant id.
type Metrics struct {
	obtain      *prometheus.CounterVec
	wait        *prometheus.HistogramVec
	lost        *prometheus.CounterVec
	renewErrors prometheus.Counter
}

// NewMetrics builds the collectors and registers them with reg. A nil reg
// leaves them unregistered (they still count).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		obtain: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "billing_lock_obtain_total",
			Help: "Lock acquisitions by mode (try: Obtain, wait: Wait) and result."}, []string{"mode", "result"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "billing_lock_wait_seconds",
			Help:    "Time spent in Wait until the lock was obtained or the wait gave up, by result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "billing_lock_lost_total",
			Help: "Locks lost while held, by reason (not_held: deleted, expired or taken; expired: not renewable in time)."}, []string{"reason"}),
		renewErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "billing_lock_renew_errors_total",
			Help: "Transient errors of watchdog renewals (each is retried until the lock would expire)."}),
	}
	for _, mode := range []string{modeTry, modeWait} {
		for _, r := range []string{resultObtained, resultNotObtained, resultError} {
			m.obtain.WithLabelValues(mode, r)
		}
	}
	for _, r := range []string{reasonNotHeld, reasonExpired} {
		m.lost.WithLabelValues(r)
	}
	if err := metrics.Register(reg, m.obtain, m.wait, m.lost, m.renewErrors); err != nil {
		return nil, fmt.Errorf("lock: register metrics: %w", err)
	}
	return m, nil
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return resultObtained
	case errors.Is(err, ErrNotObtained):
		return resultNotObtained
	default:
		return resultError
	}
}
