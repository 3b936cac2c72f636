package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// WatchMany is Watch for locks taken together (by WaitMany, say): one
// watchdog goroutine renews all of them, in one round trip (as ObtainMany
// takes them), every TTL/3, instead of a goroutine and a timer per lock. It returns one context,
// derived from ctx, that is cancelled when any of the locks is lost (cause: an
// error wrapping ErrLost and naming the key), when any of them is released, or
// when ctx ends. Do the work that needs the locks under it.
//
// Each lock keeps the guarantees of Watch: a loss is noticed at the next
// renewal, so within TTL/3 plus one round trip; renewals are bounded by the
// first expiry among the locks, and transient Redis errors are retried with
// backoff until a lock would expire, and then that lock counts as lost. The
// watchdog exits when the returned context ends, whatever the reason; Release
// and ReleaseMany wait for it. Other watchers of the same locks keep their own
// watchdogs (see Watch). The locks must come from c.
func (c *Client) WatchMany(ctx context.Context, locks []*Lock) context.Context {
	wctx, cancel := context.WithCancelCause(ctx)
	dog := &watchdog{done: make(chan struct{})}
	var mine []*Lock
	defer func() {
		if len(mine) == 0 { // nothing can end it: end it now
			cancel(errNothingToWatch)
		}
	}()
	for _, l := range locks {
		if l.client != c {
			cancel(fmt.Errorf("lock: watch %s: lock of another client", l.key))
			continue
		}
		l.mu.Lock()
		switch {
		case l.lostCause != nil:
			cancel(l.lostCause)
		case l.released || l.releasing:
			cancel(ErrNotHeld)
		default:
			l.watchers = append(l.watchers, cancel)
			l.addDog(dog)
			mine = append(mine, l)
		}
		l.mu.Unlock()
	}
	if len(mine) > 0 {
		// Started even when wctx has already ended, so that dog.done, which
		// the locks now refer to, is closed.
		go c.watchMany(wctx, mine, dog.done)
	}
	return wctx
}

// errNothingToWatch ends the context of a WatchMany of no lock it could watch.
var errNothingToWatch = errors.New("lock: no lock to watch")

func (c *Client) watchMany(ctx context.Context, locks []*Lock, done chan<- struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Until(nextRenewal(locks)))
	defer timer.Stop()
	var retry backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		failed, err := c.renewMany(ctx, locks)
		switch {
		case ctx.Err() != nil:
			return // stopped, or a renewal found a lock lost (which cancels ctx)
		case err == nil:
			retry.reset()
			timer.Reset(time.Until(nextRenewal(locks)))
			continue
		}
		c.opts.Metrics.renewErrors.Inc()
		left := failed[0].untilDeadline()
		var expired bool
		for _, l := range failed {
			if l.untilDeadline() <= 0 {
				l.markLost(reasonExpired, fmt.Errorf("not renewed before expiry: %w", err))
				expired = true
			}
			left = min(left, l.untilDeadline())
		}
		if expired {
			return
		}
		ttl, _ := failed[0].lease()
		retry.min, retry.max = 10*time.Millisecond, max(ttl/9, 10*time.Millisecond)
		c.opts.Logger.Warn("lock renew failed, retrying",
			zap.Int("locks", len(failed)), zap.Duration("left", left), zap.Error(err))
		timer.Reset(min(retry.delay(), left))
	}
}

// renewMany refreshes every lock with its current TTL in one round trip,
// giving up when the first of them would have expired anyway. Locks found not
// ours are marked lost; those whose renewal failed are returned with the
// errors.
func (c *Client) renewMany(ctx context.Context, locks []*Lock) ([]*Lock, error) {
	deadline := locks[0].deadline()
	keys := make([]string, len(locks))
	one := make([][]any, len(locks))
	many := make([]any, 0, 2*len(locks))
	ttls := make([]time.Duration, len(locks))
	for i, l := range locks {
		if d := l.deadline(); d.Before(deadline) {
			deadline = d
		}
		ttl, _ := l.lease()
		keys[i], one[i], ttls[i] = l.key, []any{l.token, ttl.Milliseconds()}, ttl
		many = append(many, l.token, ttl.Milliseconds())
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	var failed []*Lock
	replies, rerrs := c.perKey(rctx, c.scripts.refresh, c.scripts.refreshMany, keys, one, many)
	for i, ok := range replies {
		l := locks[i]
		switch {
		case rerrs[i] != nil:
			failed = append(failed, l)
		case ok != 1:
			l.markLost(reasonNotHeld, ErrNotHeld)
		default:
			l.mu.Lock()
			l.ttl, l.renewedAt = ttls[i], sent
			l.mu.Unlock()
		}
	}
	return failed, keyErrors("refresh", keys, rerrs)
}

// nextRenewal is when the first of the locks is due for renewal: TTL/3 after
// its last successful renewal was sent.
func nextRenewal(locks []*Lock) time.Time {
	var next time.Time
	for i, l := range locks {
		ttl, renewedAt := l.lease()
		if at := renewedAt.Add(ttl / 3); i == 0 || at.Before(next) {
			next = at
		}
	}
	return next
}

func (l *Lock) untilDeadline() time.Duration { return time.Until(l.deadline()) }
