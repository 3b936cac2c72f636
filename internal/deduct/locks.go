package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
)

// locked runs fn under the merchants' locks with a context that ends as soon
// as one of them is lost, then releases them (a simulated crash releases
// nothing).
func (d *Deductor) locked(ctx context.Context, merchants []string, fn func(ctx context.Context, held map[string]HeldLock) error) (err error) {
	held, err := d.lockAll(ctx, merchants)
	if err != nil {
		return err
	}
	fctx, stop := fence(ctx, held)
	defer func() {
		stop()
		var crash *crashError
		if errors.As(err, &crash) {
			return
		}
		d.releaseAll(ctx, held)
	}()
	return lockCause(fctx, fn(fctx, held))
}

// lockAll takes the merchants' locks in sorted order, so that two workers
// wanting overlapping sets never wait for each other in a cycle: with a
// BatchLocker in one call (one round trip when nothing is contended), else one
// Acquire after another. On failure the locks taken so far are released.
func (d *Deductor) lockAll(ctx context.Context, merchants []string) (map[string]HeldLock, error) {
	sorted := slices.Compact(slices.Sorted(slices.Values(merchants)))
	held := make(map[string]HeldLock, len(sorted))
	if bl, ok := d.locks.(BatchLocker); ok && len(sorted) > 1 {
		locks, err := bl.AcquireAll(ctx, sorted)
		if err != nil {
			return nil, fmt.Errorf("deduct: lock %d merchants: %w", len(sorted), err)
		}
		if len(locks) != len(sorted) || slices.Contains(locks, nil) {
			d.releaseMany(ctx, bl, slices.DeleteFunc(locks, func(l HeldLock) bool { return l == nil }))
			return nil, fmt.Errorf("deduct: locker returned %d locks for %d merchants", len(locks), len(sorted))
		}
		return heldOf(sorted, locks), nil
	}
	for _, m := range sorted {
		l, err := d.locks.Acquire(ctx, m)
		if err != nil {
			d.releaseAll(ctx, held)
			return nil, fmt.Errorf("deduct: lock merchant %s: %w", m, err)
		}
		held[m] = l
	}
	return held, nil
}

func heldOf(merchants []string, locks []HeldLock) map[string]HeldLock {
	held := make(map[string]HeldLock, len(merchants))
	for i, m := range merchants {
		held[m] = locks[i]
	}
	return held
}

// releaseAll unlocks, even when ctx has ended, within ReleaseTimeout. A lock
// that cannot be released expires by its TTL; the batch's effects stand.
func (d *Deductor) releaseAll(ctx context.Context, held map[string]HeldLock) {
	if len(held) == 0 {
		return
	}
	if bl, ok := d.locks.(BatchLocker); ok && len(held) > 1 {
		locks := make([]HeldLock, 0, len(held))
		for _, l := range held {
			locks = append(locks, l)
		}
		d.releaseMany(ctx, bl, locks)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.ReleaseTimeout)
	defer cancel()
	for m, l := range held {
		if err := l.Release(rctx); err != nil {
			d.log.Warn("release merchant lock", zap.String("merchant_id", m), zap.Error(err))
		}
	}
}

// releaseMany is releaseAll with a BatchLocker: one call for all the locks.
func (d *Deductor) releaseMany(ctx context.Context, bl BatchLocker, locks []HeldLock) {
	if len(locks) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.ReleaseTimeout)
	defer cancel()
	if err := bl.ReleaseAll(rctx, locks); err != nil {
		d.log.Warn("release merchant locks", zap.Int("locks", len(locks)), zap.Error(err))
	}
}

// fence returns a context that ends, with cause ErrLockLost, as soon as any of
// the locks is lost. stop must be called when the batch is over. Locks that
// share one context (one watchdog for the batch) are watched once.
func fence(parent context.Context, held map[string]HeldLock) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	byCtx := make(map[context.Context][]string, 1)
	for m, l := range held {
		byCtx[l.Context()] = append(byCtx[l.Context()], m)
	}
	stops := make([]func() bool, 0, len(byCtx))
	for lctx, ms := range byCtx {
		what := "merchant " + ms[0]
		if len(ms) > 1 {
			what = fmt.Sprintf("one of %d merchants", len(ms))
		}
		stops = append(stops, context.AfterFunc(lctx, func() {
			cancel(fmt.Errorf("%w: %s: %w", ErrLockLost, what, context.Cause(lctx)))
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
	}
}
