package lock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
)

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
