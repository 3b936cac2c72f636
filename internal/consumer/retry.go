package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/failure"
)

// errItemCount marks a handler that returned a per-item error slice of the
// wrong length; the call counts as a transient batch failure.
var errItemCount = errors.New("consumer: handler returned per-item errors for a different number of items")

// outcome is what a handler call returned for some of its items: an error
// per item (none: all done) or one for them all.
type outcome struct {
	errs []error
	err  error
}

// settle brings every message of the lane's batch to an end: done, dead-
// lettered, or (only when the generation stops) abandoned uncommitted.
// Undecodable messages are dead-lettered first, then the rest is handled;
// first, when not nil, is the outcome of the batch's first call, made
// jointly with other lanes' batches (see settleJoint).
func (g *generation[T]) settle(l *lane[T], first *outcome) {
	start := time.Now()
	ctx, span := g.startBatch(l)
	defer span.End()
	valid := l.batch[:0]
	var invalid []pending[T]
	for i := range l.batch {
		e := &l.batch[i]
		if e.err == nil {
			valid = append(valid, *e)
			continue
		}
		invalid = append(invalid, toDLQ(*e, e.err))
	}
	if len(invalid) > 0 && !g.deadLetter(ctx, l, invalid) {
		return
	}
	switch {
	case first != nil:
		g.retry(ctx, l, valid, first.errs, first.err)
	case len(valid) > 0:
		g.c.m.batchSize.Observe(float64(len(valid)))
		g.handle(ctx, l, valid)
	}
	g.c.m.batchDuration.Observe(time.Since(start).Seconds())
}

// handle calls the handler until every item is done or dead-lettered, and
// reports false when it gave up because the generation stopped. Failures wait
// with backoff, and so does the lane. An outage (failure.IsOutage, or any
// error while the probe fails) is retried as it is, counting no attempt;
// otherwise several failed items (or a permanent batch error) are split and
// retried alone, and an item failing alone counts an attempt, dead-lettered
// as exhausted after MaxAttempts.
func (g *generation[T]) handle(ctx context.Context, l *lane[T], envs []envelope[T]) bool {
	errs, batchErr := g.call(ctx, l, envs)
	return g.retry(ctx, l, envs, errs, batchErr)
}

// retry is handle once the handler returned errs and batchErr for envs.
func (g *generation[T]) retry(ctx context.Context, l *lane[T], envs []envelope[T], errs []error, batchErr error) bool {
	for {
		if permanent(batchErr) {
			if len(envs) > 1 {
				g.c.m.retries.WithLabelValues(retrySplit).Inc()
				return g.alone(ctx, l, envs)
			}
			return g.deadLetter(ctx, l, []pending[T]{toDLQ(envs[0], batchErr)}) && g.recovered(l)
		}
		failed, cause, ok := g.sort(ctx, l, envs, errs, batchErr)
		switch {
		case !ok || (len(failed) > 0 && g.stop.Err() != nil):
			return false
		case len(failed) == 0:
			return g.recovered(l)
		}
		if failure.IsOutage(cause) {
			g.c.health.fail(l.key, cause)
			g.c.m.retries.WithLabelValues(retryOutage).Inc()
			g.log.Warn("outage, batch waits", zap.Int("lane", l.id), zap.Int("items", len(failed)), zap.Error(cause))
		} else if err := g.probeDeps(); err != nil {
			g.c.health.fail(l.key, err)
			g.c.m.retries.WithLabelValues(retryOutage).Inc()
			g.log.Warn("dependency down, batch waits", zap.Int("lane", l.id), zap.Int("items", len(failed)),
				zap.Error(cause), zap.NamedError("probe", err))
		} else if len(failed) > 1 {
			g.c.m.retries.WithLabelValues(retrySplit).Inc()
			return g.alone(ctx, l, failed)
		} else if g.countAttempt(l, &failed[0], cause) {
			return g.deadLetter(ctx, l, []pending[T]{{e: failed[0], class: dlq.ClassExhausted, cause: cause}}) && g.recovered(l)
		}
		if !sleep(g.stop, l.bo.NextBackOff()) {
			return false
		}
		envs = failed
		errs, batchErr = g.call(ctx, l, envs)
	}
}

// countAttempt records a failure of e alone and reports whether it used up
// MaxAttempts; if not, Ready reports it until the retry settles.
func (g *generation[T]) countAttempt(l *lane[T], e *envelope[T], cause error) (exhausted bool) {
	if e.fail(); e.attempts >= g.c.cfg.MaxAttempts {
		return true
	}
	g.c.health.fail(l.key, fmt.Errorf("consumer: partition %d offset %d failing (attempt %d/%d): %w",
		e.part.id, e.msg.Offset, e.attempts, g.c.cfg.MaxAttempts, cause))
	g.c.m.retries.WithLabelValues(retryItem).Inc()
	g.log.Warn("item failed, retrying", logFields(e, zap.Int("attempt", e.attempts), zap.Error(cause))...)
	return false
}

// recovered clears the lane's failure state once a batch is settled.
func (g *generation[T]) recovered(l *lane[T]) bool {
	l.bo.Reset()
	g.c.health.ok(l.key)
	return true
}

// alone handles each item as a batch of its own, in order.
func (g *generation[T]) alone(ctx context.Context, l *lane[T], envs []envelope[T]) bool {
	for i := range envs {
		if !g.handle(ctx, l, envs[i:i+1]) {
			return false
		}
	}
	return true
}

// call runs the handler on envs; ctx is the generation's, with the batch's span.
func (g *generation[T]) call(ctx context.Context, l *lane[T], envs []envelope[T]) ([]error, error) {
	l.items = l.items[:0]
	for i := range envs {
		l.items = append(l.items, Item[T]{Msg: envs[i].msg, Value: envs[i].value})
	}
	errs, err := g.c.handler.HandleBatch(ctx, l.items)
	clear(l.items)
	if err == nil && len(errs) != 0 && len(errs) != len(envs) {
		err = fmt.Errorf("%w: %d errors for %d items", errItemCount, len(errs), len(envs))
	}
	return errs, err
}

// sort marks the done items done, dead-letters the permanent failures, and
// returns the transient ones with the first transient cause that is not an
// outage, else the first outage: one item failing for its own reason gets
// the batch split even while others meet an outage. ok is false when a
// dead-letter publish gave up because the generation stopped.
func (g *generation[T]) sort(ctx context.Context, l *lane[T], envs []envelope[T], errs []error, batchErr error) (failed []envelope[T], cause error, ok bool) {
	if batchErr != nil {
		return envs, batchErr, true
	}
	var dead []pending[T]
	for i := range envs {
		var err error
		if len(errs) > 0 {
			err = errs[i]
		}
		switch {
		case err == nil:
			envs[i].part.done(envs[i].msg.Offset)
		case permanent(err):
			dead = append(dead, toDLQ(envs[i], err))
		default:
			if cause == nil || (failure.IsOutage(cause) && !failure.IsOutage(err)) {
				cause = err
			}
			failed = append(failed, envs[i])
		}
	}
	if len(dead) > 0 && !g.deadLetter(ctx, l, dead) {
		return nil, nil, false
	}
	return failed, cause, true
}

// permanent reports an error to dead-letter at once. An outage never is,
// whatever marks it: it would fail any message.
func permanent(err error) bool {
	return failure.IsPermanent(err) && !failure.IsOutage(err)
}

// probeDeps asks the probe whether the handler's dependencies are up.
func (g *generation[T]) probeDeps() error {
	if g.c.probe == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(g.work, g.c.cfg.ProbeTimeout)
	defer cancel()
	return g.c.probe(ctx)
}

// newBackoff is exponential with jitter, capped, never giving up.
func newBackoff(cfg Config) *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(cfg.BackoffInitial),
		backoff.WithMaxInterval(cfg.BackoffMax), backoff.WithMaxElapsedTime(0))
}

// sleep waits d unless ctx ends first, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
