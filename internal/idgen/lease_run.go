package idgen

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Run keeps the lease: it renews at TTL/3 (retrying failures at TTL/10; if
// none succeeds before the local deadline, issuance stops by itself), and
// after a loss re-acquires the worker ID as soon as it is free. It returns
// when ctx ends, after releasing the lease, or when Release is called. It
// starts no goroutines; run it in one you own.
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
			l.logger.Warn("idgen: lease renewal failed; retrying", zap.Error(err), zap.Time("valid_until", l.validUntil()))
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

func (l *Lease) validUntil() time.Time {
	if w := l.window.Load(); w != nil {
		return w.validUntil
	}
	return time.Time{}
}
