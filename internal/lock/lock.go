package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Lock is one acquisition of a lock key. Its methods are safe for concurrent
// use.
type Lock struct {
	client *Client
	key    string
	token  string

	mu        sync.Mutex
	ttl       time.Duration
	renewedAt time.Time // when the last successful SET or PEXPIRE was sent
	releasing bool      // a Release is in flight
	released  bool
	lostCause error                     // non-nil once the lock is known lost
	lost      chan struct{}             // closed with lostCause
	watchers  []context.CancelCauseFunc // contexts returned by Watch and WatchMany
	dogs      []*watchdog               // one per Watch or WatchMany; Release waits for them
}

func newLock(c *Client, key, token string, ttl time.Duration, sent time.Time) *Lock {
	return &Lock{client: c, key: key, token: token, ttl: ttl, renewedAt: sent, lost: make(chan struct{})}
}

// Key is the Redis key of the lock.
func (l *Lock) Key() string { return l.key }

// Token is the random value stored at Key while this acquisition holds the
// lock. It is the fencing token: a script that checks
// redis.call('GET', lockKey) == token before it writes (keys of the same
// {merchant} hash tag) cannot be run by a holder that lost the lock.
func (l *Lock) Token() string { return l.token }

// Lost is closed when the lock is found lost while held: by the watchdog, or
// by Refresh, TTL or Release finding it not ours. It is never closed by a
// successful Release.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// TTL returns the remaining time to live of the lock, or ErrNotHeld.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l.isReleased() {
		return 0, ErrNotHeld
	}
	ms, err := l.client.scripts.pttl.Run(ctx, l.client.rdb, []string{l.key}, l.token).Int64()
	if err != nil {
		return 0, fmt.Errorf("lock: ttl %s: %w", l.key, err)
	}
	switch {
	case ms == -2:
		l.markLost(reasonNotHeld, ErrNotHeld)
		return 0, ErrNotHeld
	case ms < 0:
		return 0, fmt.Errorf("lock: ttl %s: key has no expiry", l.key)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Refresh extends the lock to ttl from now, or returns ErrNotHeld. A running
// watchdog renews with the new ttl from then on.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if l.isReleased() {
		return ErrNotHeld
	}
	return l.refresh(ctx, ttl)
}

func (l *Lock) refresh(ctx context.Context, ttl time.Duration) error {
	sent := time.Now()
	ok, err := l.client.scripts.refresh.Run(ctx, l.client.rdb, []string{l.key}, l.token, ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("lock: refresh %s: %w", l.key, err)
	}
	if ok != 1 {
		l.markLost(reasonNotHeld, ErrNotHeld)
		return ErrNotHeld
	}
	l.mu.Lock()
	l.ttl, l.renewedAt = ttl, sent
	l.mu.Unlock()
	return nil
}

// Release stops the watchdog, waits for it to exit, cancels the contexts
// returned by Watch, and then deletes the lock if it is still ours (announcing
// the release to waiters). It returns ErrNotHeld, deleting nothing, when the
// lock is not ours. After a Redis error the lock may still be held; it is no
// longer renewed, so it expires within its TTL, and Release may be retried.
func (l *Lock) Release(ctx context.Context) error {
	dogs, ok := l.beginRelease()
	if !ok {
		return ErrNotHeld
	}
	for _, dog := range dogs {
		<-dog.done
	}
	c := l.client
	n, err := c.scripts.release.Run(ctx, c.rdb, []string{l.key}, l.token, c.keys.LockChannel(l.key)).Int64()
	return l.endRelease(n, err)
}

// beginRelease marks a release in flight and cancels the watched contexts,
// which stops the watchdogs. It returns the watchdogs to await, or false when
// the lock is released or being released.
func (l *Lock) beginRelease() ([]*watchdog, bool) {
	l.mu.Lock()
	if l.released || l.releasing {
		l.mu.Unlock()
		return nil, false
	}
	l.releasing = true
	dogs, watchers := l.dogs, l.watchers
	l.dogs, l.watchers = nil, nil
	l.mu.Unlock()
	for _, cancel := range watchers {
		cancel(nil)
	}
	return dogs, true
}

// endRelease records the reply of the release script: 1 deleted, else not ours.
func (l *Lock) endRelease(n int64, err error) error {
	if err != nil {
		l.mu.Lock()
		l.releasing = false
		l.mu.Unlock()
		return fmt.Errorf("lock: release %s: %w", l.key, err)
	}
	if n != 1 {
		l.markLost(reasonNotHeld, ErrNotHeld)
	}
	l.mu.Lock()
	l.released, l.releasing = true, false
	l.mu.Unlock()
	if n != 1 {
		return ErrNotHeld
	}
	return nil
}

func (l *Lock) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// markLost records the first loss of a held lock: it closes Lost, cancels the
// watched contexts with a cause wrapping ErrLost, and counts it.
func (l *Lock) markLost(reason string, err error) {
	l.mu.Lock()
	if l.released || l.lostCause != nil {
		l.mu.Unlock()
		return
	}
	cause := fmt.Errorf("%w: %s: %w", ErrLost, l.key, err)
	l.lostCause = cause
	watchers := l.watchers
	l.watchers = nil
	// Counted before anyone is told, so whoever sees the loss sees it counted.
	l.client.opts.Metrics.lost.WithLabelValues(reason).Inc()
	close(l.lost)
	l.mu.Unlock()

	l.client.opts.Logger.Warn("lock lost", zap.String("key", l.key), zap.String("reason", reason), zap.Error(err))
	for _, cancel := range watchers {
		cancel(cause)
	}
}
