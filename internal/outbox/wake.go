package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// PubSub is the part of a go-redis client that carries wakes.
type PubSub interface {
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Wakes carry "a commit wrote events" from the processes of a database that
// do not lead to the relay that does, over a Redis channel
// (keyspace.OutboxWake). A wake is a hint, not a delivery: one lost to a
// Redis failure, or sent while no leader listened, delays those events by
// at most a Poll. Nothing is published while nothing is committed. The zero
// value (no Redis) carries none.
type Wakes struct {
	Redis   PubSub
	Channel string
}

// publishTimeout bounds one PUBLISH: a later wake is no longer prompt.
const publishTimeout = time.Second

// announce publishes a wake for each signal on r.announced until ctx ends:
// at most one PUBLISH in flight, and the commits meanwhile share the next.
func (r *Relay) announce(ctx context.Context) {
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.announced:
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := r.cfg.Wakes.Redis.Publish(pctx, r.cfg.Wakes.Channel, "").Err()
		cancel()
		if err != nil && ctx.Err() == nil {
			r.m.errors.WithLabelValues("wake").Inc()
			if !failing { // once per outage: commits may come by the thousand
				r.log.Warn("balance-event wake not published; the active relay finds the rows at its next poll", zap.Error(err))
			}
		}
		failing = err != nil
	}
}

// listen wakes r on each message of the channel until ctx ends, subscribing
// again with backoff after a failure.
func (r *Relay) listen(ctx context.Context) {
	bo := retryBackOff()
	_ = backoff.RetryNotify(func() error { return r.subscribe(ctx, bo) }, backoff.WithContext(bo, ctx), func(err error, wait time.Duration) {
		r.m.errors.WithLabelValues("wake").Inc()
		r.log.Warn("balance-event relay: wake channel lost, subscribing again; the poll still runs", zap.Duration("wait", wait), zap.Error(err))
	})
}

// subscribe wakes r from one subscription until it fails (its error) or ctx
// ends (nil). Once subscribed it wakes r too, for commits announced while
// nobody listened.
func (r *Relay) subscribe(ctx context.Context, bo backoff.BackOff) error {
	ps := r.cfg.Wakes.Redis.Subscribe(ctx, r.cfg.Wakes.Channel)
	// Receive ignores ctx's end: closing the subscription ends it.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { _ = ps.Close(); close(closed) })
	defer func() {
		if stop() {
			_ = ps.Close()
		} else {
			<-closed
		}
	}()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return ignoreEnd(ctx, fmt.Errorf("outbox: wake channel %s: %w", r.cfg.Wakes.Channel, err))
		}
		switch msg.(type) {
		case *redis.Subscription:
			bo.Reset()
			notify(r.wake)
		case *redis.Message:
			notify(r.wake)
		}
	}
}

// start runs f in a goroutine; stop ends it and waits for it.
func start(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() { cancel(); <-done }
}

// notify signals ch without waiting: a signal already pending covers this one.
func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
