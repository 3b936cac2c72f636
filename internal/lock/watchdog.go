package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// watchdog is the renewal goroutine of a Lock, owned like an etcd session's
// keep-alive: it is stopped by cancelling its context and closes done when it
// has exited.
type watchdog struct {
	done chan struct{}
}

// Watch starts the watchdog, which renews the lock every TTL/3 with the
// token-checked script, and returns a context derived from ctx that is
// cancelled when the lock is lost (cause: an error wrapping ErrLost), when
// Release is called, or when ctx ends. Do the work that needs the lock under
// the returned context.
//
// The watchdog exits on Release (which waits for it), when ctx ends, and when
// a renewal finds the lock not ours. A loss is noticed at the next renewal,
// so within TTL/3 plus one round trip. Transient Redis errors are retried with
// backoff until the lock would expire (TTL after the last successful renewal
// was sent, minus a small allowance for clock drift); then the lock counts as
// lost, before Redis would let another holder take it.
//
// Call Watch once per acquisition. A later call shares the running watchdog,
// which the first call's ctx still bounds, and returns a context that is also
// cancelled on loss and on Release; if that watchdog has exited (its ctx
// ended), the call starts a new one. After Release, or once the lock is lost,
// Watch returns a cancelled context.
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
	if l.dog == nil || l.dog.exited() {
		l.dog = &watchdog{done: make(chan struct{})}
		go l.watch(wctx, l.dog.done)
	}
	return wctx
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

// deadline is when the lock must be assumed expired: TTL after the last
// successful SET or PEXPIRE was sent, less 1% and 2ms for clock drift between
// this process and Redis.
func (l *Lock) deadline() time.Time {
	ttl, renewedAt := l.lease()
	return renewedAt.Add(ttl - ttl/100 - 2*time.Millisecond)
}
