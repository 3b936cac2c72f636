// Package consumer consumes a topic in a kafka-go consumer group and hands
// batches to a handler. Messages go by lane key to bounded, ordered lanes run
// in parallel; each partition commits up to its highest contiguous done
// offset, and a revoked generation's work is dropped uncommitted. Delivery is
// at least once: handlers must be idempotent.
//
// A permanent error (failure.IsPermanent, every decode error) dead-letters the
// message; a transient one is retried with backoff while its lane waits. An
// outage (failure.IsOutage, or a transient error while the Probe fails) is
// retried without counting attempts; an item failing alone with the Probe
// healthy is dead-lettered as exhausted after MaxAttempts. Dead-lettering is
// at least once, as Spring Kafka's DLT: an offset is committed only after the
// dead-letter topic acknowledged its record, keyed by provenance (package dlq).
// An optional Gate takes the consumer out of its group and back in (a worker
// that cannot write steps aside).
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/logging"
)

// Item is one decoded message of a batch.
type Item[T any] struct {
	Msg   kafka.Message
	Value T
}

// Decoder decodes and validates a message and names its lane (messages with
// the same Route are handled in order). An error is permanent: the message
// goes to the dead-letter topic with class failure.ClassOf(err), or "invalid".
type Decoder[T any] func(kafka.Message) (value T, route Route, err error)

// Route names a message's lane: the lane of Key, plus Shard lanes further
// on, so that the shards of one key run in parallel lanes (each in order) as
// long as there are lanes enough, and never share a lane needlessly.
type Route struct {
	Key   string
	Shard int
}

// lane is the index of the route's lane among n.
func (r Route) lane(n int) int {
	return int((fnv32(r.Key) + uint32(r.Shard)) % uint32(n))
}

// Handler handles the lanes' batches, concurrently across lanes, and keeps no
// item after returning. It returns one error per item (nil: done; permanent:
// dead-letter it; other: retry it), or a batch error for all of them (an
// outage if failure.IsOutage, even when also permanent). A retried item may
// follow items of its key that succeeded in the same call.
type Handler[T any] interface {
	HandleBatch(ctx context.Context, items []Item[T]) ([]error, error)
}

// Probe checks the handler's dependencies: failing after a transient error,
// it makes the error an outage. A nil Probe counts every such failure.
type Probe func(ctx context.Context) error

// ErrAlreadyRun is returned by a second call to Run.
var ErrAlreadyRun = errors.New("consumer: Run called twice")

// Consumer runs the group membership, the fetch, the lanes and the commits.
type Consumer[T any] struct {
	cfg     Config
	decode  Decoder[T]
	handler Handler[T]
	probe   Probe
	log     *zap.Logger
	m       *Metrics
	health  *health

	started   atomic.Bool
	transport kafka.RoundTripper // of the dead-letter writer and look-ups
	dlqWriter *kafka.Writer

	all      sync.WaitGroup // every goroutine Run starts
	stopOnce sync.Once
	deadline time.Time // set by stopping()
}

// New checks the configuration and returns a Consumer. m may be nil (then
// metrics are kept but not registered).
func New[T any](cfg Config, decode Decoder[T], h Handler[T], probe Probe, logger *zap.Logger, m *Metrics) (*Consumer[T], error) {
	cfg.setDefaults()
	errs := []error{cfg.Validate()}
	if decode == nil {
		errs = append(errs, errors.New("consumer: nil Decoder"))
	}
	if h == nil {
		errs = append(errs, errors.New("consumer: nil Handler"))
	}
	if logger == nil {
		errs = append(errs, errors.New("consumer: nil logger"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	return &Consumer[T]{
		cfg: cfg, decode: decode, handler: h, probe: probe, m: m, health: newHealth(),
		log: logger.With(zap.String("topic", cfg.Topic), zap.String("group", cfg.Group)),
	}, nil
}

// Gate decides group membership: Admit blocks until the consumer may be a
// member and returns a context, derived from ctx, that ends when it must
// leave; release frees that context. A nil Gate admits for as long as Run runs.
type Gate interface {
	Admit(ctx context.Context) (member context.Context, release context.CancelFunc, err error)
}

// Run consumes until ctx ends, then stops fetching, lets in-flight batches
// finish (abandoning, uncommitted, those running after most of
// ShutdownTimeout), commits what is done and leaves the group. It returns nil
// within ShutdownTimeout of ctx ending (a group Close that outlasts it is left
// to its network timeouts), an error only when it cannot start. When the
// Gate's member context ends first, it leaves the group the same way (its
// partitions go to the other members), reports ErrLeft, and waits for the
// Gate to admit it again.
func (c *Consumer[T]) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	c.transport = c.cfg.Transport
	if c.transport == nil {
		tr := &kafka.Transport{}
		if d := c.cfg.Dialer; d != nil { // the same identity and security as the readers
			tr.ClientID, tr.TLS, tr.SASL = d.ClientID, d.TLS, d.SASLMechanism
		}
		defer tr.CloseIdleConnections()
		c.transport = tr
	}
	c.dlqWriter = newDLQWriter(c.cfg, c.transport, c.log)
	defer context.AfterFunc(ctx, func() { c.stopping() })() // the bound starts at cancellation

	for joined := false; ctx.Err() == nil; joined = true {
		member, release, err := c.admit(ctx)
		if err != nil {
			break // ctx ended while waiting
		}
		if joined {
			c.health.setState(ErrJoining) // no longer waiting for the gate
			c.log.Info("consumer: admitted again, rejoining the group")
		}
		err = c.member(ctx, member)
		release()
		if err != nil {
			c.health.setState(ErrStopped)
			return err
		}
		if ctx.Err() == nil {
			c.health.setState(ErrLeft)
			c.log.Warn("consumer: left the group, its gate closed; done offsets committed, the rest is redelivered to the other members")
		}
	}

	deadline := c.stopping()
	if waitGroupFor(&c.all, time.Until(deadline)) {
		_ = c.dlqWriter.Close() // writes are synchronous: nothing is left to flush
	} else {
		c.log.Error("handler calls still running at the shutdown deadline; abandoned, their offsets not committed")
	}
	c.health.setState(ErrStopped)
	return nil
}

// admit waits for the Gate; without one it admits at once, until ctx ends.
func (c *Consumer[T]) admit(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if c.cfg.Gate == nil {
		return ctx, func() {}, nil
	}
	return c.cfg.Gate.Admit(ctx)
}

// member is one membership of the group: it joins, runs generation after
// generation until member ends (ctx's end included), and leaves the group.
func (c *Consumer[T]) member(ctx, member context.Context) error {
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: c.cfg.Group, Brokers: c.cfg.Brokers, Dialer: c.cfg.Dialer, Topics: []string{c.cfg.Topic},
		HeartbeatInterval: c.cfg.HeartbeatInterval, SessionTimeout: c.cfg.SessionTimeout,
		RebalanceTimeout: c.cfg.RebalanceTimeout, JoinGroupBackoff: c.cfg.JoinGroupBackoff, Timeout: c.cfg.GroupTimeout,
		WatchPartitionChanges: true, StartOffset: kafka.FirstOffset,
		ErrorLogger: logging.Kafka(c.log),
	})
	if err != nil {
		return fmt.Errorf("consumer: group: %w", err)
	}
	closed := make(chan struct{})
	closeGroup := sync.OnceFunc(func() {
		go func() {
			defer close(closed)
			if err := group.Close(); err != nil {
				c.log.Warn("close consumer group", zap.Error(err))
			}
		}()
	})

	for member.Err() == nil {
		gen, err := group.Next(member)
		if err != nil {
			if member.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			c.health.fail("group", fmt.Errorf("consumer: group %s: %w", c.cfg.Group, err))
			c.log.Warn("join consumer group", zap.Error(err))
			continue // the group backs off by itself
		}
		c.health.ok("group")
		c.health.setState(nil)
		c.m.generations.Inc()
		done := make(chan struct{})
		gen.Start(func(genCtx context.Context) {
			defer close(done)
			c.generation(ctx, member, genCtx, gen, closeGroup)
		})
		<-done
	}
	c.health.ok("group")

	closeGroup()
	if !waitUntil(closed, c.leaveBy(ctx)) {
		c.log.Warn("consumer group close outlasted its bound; leaving it to finish on its own")
	}
	return nil
}

// leaveBy bounds leaving the group: the shutdown deadline once ctx ended,
// else ShutdownTimeout from now (a step aside is not a shutdown).
func (c *Consumer[T]) leaveBy(ctx context.Context) time.Time {
	if ctx.Err() != nil {
		return c.stopping()
	}
	return time.Now().Add(c.cfg.ShutdownTimeout)
}

// Ready returns nil once joined while nothing is retried; else the state
// (joining, stopped) or the failure retried longest, since when.
func (c *Consumer[T]) Ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.health.err()
}

// stopping returns the shutdown deadline, fixed when first asked (as Run's
// context ends), a twentieth of ShutdownTimeout short of it.
func (c *Consumer[T]) stopping() time.Time {
	c.stopOnce.Do(func() { c.deadline = time.Now().Add(c.cfg.ShutdownTimeout - c.cfg.ShutdownTimeout/20) })
	return c.deadline
}

// goAll runs fn in a goroutine counted by wg and by Run's own wait.
func (c *Consumer[T]) goAll(wg *sync.WaitGroup, fn func()) {
	c.all.Add(1)
	wg.Add(1)
	go func() {
		defer c.all.Done()
		defer wg.Done()
		fn()
	}()
}

// waitUntil waits for done until deadline and reports whether done closed.
func waitUntil(done <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}
