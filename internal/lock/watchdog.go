package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// watchdog is a renewal goroutine, owned like an etcd session's keep-alive:
// it is stopped by cancelling its context and closes done when it has exited.
type watchdog struct {
	done chan struct{}
}

// Watch starts a watchdog, which renews the lock every TTL/3 with the
// token-checked script, and returns a context derived from ctx that is
// cancelled when the lock is lost (cause: an error wrapping ErrLost), when
// Release is called, or when ctx ends. Do the work that needs the lock under
// the returned context.
//
// The watchdog exits when that context ends (Release waits for it). A loss is
// noticed at the next renewal, so within TTL/3 plus one round trip. Each
// renewal is bounded by the lock's expiry (TTL after the last successful
// renewal was sent, minus a small allowance for clock drift), and transient
// Redis errors are retried with backoff until then; a lock not renewed by
// then counts as lost, before Redis would let another holder take it.
//
// Each call starts its own watchdog, so a lock watched twice stays renewed
// while either context lives, and each context ends on its own ctx, on loss
// and on Release, whatever becomes of the other. (Both renew: watch once per
// acquisition where you can.) After Release, or once the lock is lost, Watch
// returns a cancelled context.
func (l *Lock) Watch(ctx context.Context) context.Context {
	wctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lostCause != nil:
		cancel(l.lostCause)
		return wctx
	case l.released || l.releasing:
		cancel(ErrNotHeld)
		return wctx
	}
	l.watchers = append(l.watchers, cancel)
	dog := &watchdog{done: make(chan struct{})}
	l.addDog(dog)
	go l.watch(wctx, dog.done)
	return wctx
}

// addDog records a watchdog for Release to wait for, forgetting those that
// have exited. The caller holds l.mu.
func (l *Lock) addDog(dog *watchdog) {
	l.dogs = append(slices.DeleteFunc(l.dogs, (*watchdog).exited), dog)
}

func (w *watchdog) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (l *Lock) watch(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ttl, renewedAt := l.lease()
	timer := time.NewTimer(time.Until(renewedAt.Add(ttl / 3)))
	defer timer.Stop()
	var retry backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		err := l.renew(ctx)
		switch {
		case err == nil:
			retry.reset()
			ttl, renewedAt = l.lease()
			timer.Reset(time.Until(renewedAt.Add(ttl / 3)))
			continue
		case errors.Is(err, ErrNotHeld), ctx.Err() != nil:
			return // renew marked the lock lost, or we were stopped
		}
		l.client.opts.Metrics.renewErrors.Inc()
		left := time.Until(l.deadline())
		if left <= 0 {
			l.markLost(reasonExpired, fmt.Errorf("not renewed before expiry: %w", err))
			return
		}
		ttl, _ = l.lease()
		retry.min, retry.max = 10*time.Millisecond, max(ttl/9, 10*time.Millisecond)
		l.client.opts.Logger.Warn("lock renew failed, retrying",
			zap.String("key", l.key), zap.Duration("left", left), zap.Error(err))
		timer.Reset(min(retry.delay(), left))
	}
}

// renew refreshes the lock with its current TTL, giving up when the lock would
// have expired anyway.
func (l *Lock) renew(ctx context.Context) error {
	ttl, _ := l.lease()
	rctx, cancel := context.WithDeadline(ctx, l.deadline())
	defer cancel()
	return l.refresh(rctx, ttl)
}

func (l *Lock) lease() (time.Duration, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl, l.renewedAt
}

// deadline is when the lock must be assumed expired (see expiry).
func (l *Lock) deadline() time.Time {
	return expiry(l.lease())
}

// expiry is when a lock set or renewed for ttl by a call sent at sent must be
// assumed expired: Redis expires it ttl after it ran the call, so no earlier
// than sent+ttl by its clock; 1% and 2ms (as Redlock) allow for drift between
// this clock and Redis's. A call that guards a lock is bounded by it: a reply
// later than that is worthless (the go-redis client must honour context
// deadlines, see dial.Redis).
func expiry(ttl time.Duration, sent time.Time) time.Time {
	return sent.Add(ttl - ttl/100 - 2*time.Millisecond)
}
