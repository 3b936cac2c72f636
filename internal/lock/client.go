// Package lock is the per-merchant Redis lock of the billing write path.
//
// A lock is a string key (keyspace.Lock) whose value is the holder's random
// token, set with SET NX PX (in a script that makes a retried SET idempotent). Release, Refresh and TTL are Lua scripts that
// compare the token first, so a holder can never touch a lock it no longer
// holds. The token doubles as a fencing token: a script that checks
// GET(Lock.Key()) == Lock.Token() in the same call as its write cannot be run
// by a holder that lost the lock.
//
// The lock is a performance tool, not the guarantee: it is a single-instance
// Redis lock (no Redlock), so a failover that loses the key can let two holders
// overlap. Fencing and the ledger's unique constraint are the floor.
//
// Waiters are woken by a PUBLISH from the release script on one shared
// subscription per Client, and poll with capped, jittered backoff in case a
// notification is missed (a lock that expires is never announced).
//
// A batch that needs many locks takes, watches and releases them together:
// ObtainMany, WaitMany (deadlock-free for callers that list keys in one
// order), WatchMany (one watchdog for all) and ReleaseMany each cost one
// round trip for any number of keys.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
)

var (
	// ErrNotObtained means the lock is held by someone else. Wait wraps it
	// together with the context's error when it gives up.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrNotHeld means the lock is no longer ours: released, expired, deleted or
	// taken by another holder. Nothing was changed in Redis.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost is the cause (context.Cause) of a watched context that was
	// cancelled because the lock was lost while held.
	ErrLost = errors.New("lock: lost")
	// ErrClosed is returned by a Client after Close.
	ErrClosed = errors.New("lock: client closed")
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// Metrics receives the lock's metrics; nil means unregistered collectors.
	Metrics *Metrics
	// Logger logs lost locks and Redis errors; nil means zap.NewNop().
	Logger *zap.Logger
	// RetryMin and RetryMax bound Wait's polling backoff (default 5ms and
	// 50ms). Polling is only the fallback: a release wakes waiters at once.
	RetryMin, RetryMax time.Duration
}

func (o *Options) setDefaults() error {
	if o.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return err
		}
		o.Metrics = m
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.RetryMin == 0 {
		o.RetryMin = 5 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = max(50*time.Millisecond, o.RetryMin)
	}
	return nil
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.RetryMin < 0 {
		errs = append(errs, fmt.Errorf("lock: RetryMin %v is negative", o.RetryMin))
	}
	if o.RetryMax < o.RetryMin {
		errs = append(errs, fmt.Errorf("lock: RetryMax %v is below RetryMin %v", o.RetryMax, o.RetryMin))
	}
	return errors.Join(errs...)
}

// Client obtains locks on a single Redis or a Redis Cluster. It owns one
// subscription goroutine, started when the first waiter has to wait; Close
// stops it and waits for it.
type Client struct {
	rdb     redis.UniversalClient
	keys    keyspace.Keyspace
	opts    Options
	scripts scripts
	notify  *notifier
}

// New returns a Client on rdb. keys names the release channels of lock keys.
// rdb must honour context deadlines (go-redis: ContextTimeoutEnabled, which
// dial.Redis sets): every call that takes or renews a lock is bounded by the
// lock's expiry, and a client that ignores the bound keeps waiting on a
// silent Redis after another holder may have taken the lock.
func New(rdb redis.UniversalClient, keys keyspace.Keyspace, opts Options) (*Client, error) {
	if rdb == nil {
		return nil, errors.New("lock: nil redis client")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Client{
		rdb:     rdb,
		keys:    keys,
		opts:    opts,
		scripts: newScripts(),
		notify:  newNotifier(rdb, opts.Logger, defaultKeepAlive),
	}, nil
}

// Close stops the subscription goroutine and waits for it. Waits in progress
// return ErrClosed; locks already held keep working (Release, Refresh, their
// watchdogs). Close does not close rdb.
func (c *Client) Close() error {
	c.notify.close()
	return nil
}

// Obtain tries once (one round trip) to take the lock at key for ttl (at
// least 1ms, in whole milliseconds). It returns ErrNotObtained when someone
// else holds it, and an error when no reply came before the lock would have
// expired.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	l, err := c.try(ctx, key, ttl)
	c.opts.Metrics.obtain.WithLabelValues(modeTry, resultOf(err)).Inc()
	return l, err
}

// Wait takes the lock at key for ttl, waiting while someone else holds it
// until ctx ends. It is woken as soon as the holder releases (one round trip
// after the release script ran), and polls with jittered backoff between
// RetryMin and RetryMax in case a notification is missed or the lock expires.
// When ctx ends it returns an error that is both ErrNotObtained and ctx.Err().
// A release wakes one waiter per Client, the one waiting longest; across
// Clients, whoever sets the key first wins.
func (c *Client) Wait(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	start := time.Now()
	l, err := c.wait(ctx, key, ttl)
	res := resultOf(err)
	c.opts.Metrics.obtain.WithLabelValues(modeWait, res).Inc()
	c.opts.Metrics.wait.WithLabelValues(res).Observe(time.Since(start).Seconds())
	return l, err
}

func (c *Client) wait(ctx context.Context, key string, ttl time.Duration) (l *Lock, err error) {
	// Fast path: an uncontended lock costs one round trip and no subscription.
	l, err = c.try(ctx, key, ttl)
	if !errors.Is(err, ErrNotObtained) {
		return l, giveUp(ctx, err)
	}
	return c.waitHeld(ctx, key, ttl)
}

// waitHeld is wait after a try found the lock held: subscribe to its release
// channel, then try again on every release and on every backoff delay.
func (c *Client) waitHeld(ctx context.Context, key string, ttl time.Duration) (l *Lock, err error) {
	w, err := c.notify.add(ctx, c.keys.LockChannel(key))
	if err != nil {
		return nil, giveUp(ctx, err)
	}
	defer func() { c.notify.remove(w, l != nil) }()

	// Try again only once the subscription is confirmed, so that a release
	// between the try and the subscription cannot go unnoticed.
	timer := time.NewTimer(c.opts.RetryMax)
	defer timer.Stop()
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
	case <-c.notify.stop:
	}
	b := backoff{min: c.opts.RetryMin, max: c.opts.RetryMax}
	for {
		if l, err = c.try(ctx, key, ttl); !errors.Is(err, ErrNotObtained) {
			return l, giveUp(ctx, err)
		}
		timer.Reset(b.delay())
		select {
		case <-ctx.Done():
			return nil, giveUp(ctx, ErrNotObtained)
		case <-c.notify.stop:
			return nil, ErrClosed
		case <-w.released:
		case <-timer.C:
		}
	}
}

// giveUp turns any failure of a wait whose context has ended into
// ErrNotObtained joined with ctx.Err().
func giveUp(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotObtained, ctx.Err())
}

// try is one SET NX PX with a fresh token (in a script, see obtain.lua).
func (c *Client) try(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	select {
	case <-c.notify.stop:
		return nil, ErrClosed
	default:
	}
	if key == "" {
		return nil, errors.New("lock: empty key")
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(ctx, expiry(ttl, sent))
	defer cancel()
	ok, err := c.scripts.obtain.Run(ctx, c.rdb, []string{key}, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return nil, fmt.Errorf("lock: obtain %s: %w", key, err)
	}
	if ok != 1 {
		return nil, ErrNotObtained
	}
	return newLock(c, key, token, ttl, sent), nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("lock: ttl %v is below 1ms", ttl)
	}
	return nil
}

// newToken returns 128 random bits, URL-safe base64.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lock: token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
