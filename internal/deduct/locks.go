package deduct

import (
	"context"
	"fmt"
	"sort"

	"go.uber.org/zap"
)

// lockAll takes the merchants' locks in sorted order, so that two workers
// wanting overlapping sets never wait for each other in a cycle. On failure
// the locks taken so far are released.
func (d *Deductor) lockAll(ctx context.Context, merchants []string) (map[string]HeldLock, error) {
	sorted := append([]string(nil), merchants...)
	sort.Strings(sorted)
	held := make(map[string]HeldLock, len(sorted))
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

// releaseAll unlocks, even when ctx has ended, within ReleaseTimeout. A lock
// that cannot be released expires by its TTL; the batch's effects stand.
func (d *Deductor) releaseAll(ctx context.Context, held map[string]HeldLock) {
	if len(held) == 0 {
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

// fence returns a context that ends, with cause ErrLockLost, as soon as any of
// the locks is lost. stop must be called when the batch is over.
func fence(parent context.Context, held map[string]HeldLock) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	stops := make([]func() bool, 0, len(held))
	for m, l := range held {
		stops = append(stops, context.AfterFunc(l.Context(), func() {
			cancel(fmt.Errorf("%w: merchant %s", ErrLockLost, m))
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
	}
}
