package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
)

// waitingConsumer consumes a topic of its own group (grants, refunds) once
// it exists. Joined while the topic is missing, kafka-go's group leader ends
// each generation at once (its partition watcher cannot read the topic) and
// the member rejoins in a loop.
type waitingConsumer[T any] struct {
	*consumer.Consumer[T]
	what    string // what the topic carries, for the log
	topic   string
	client  *kafka.Client
	log     *zap.Logger
	waiting atomic.Bool // the topic is missing: nothing to consume, nothing unready
}

var errTopicMissing = errors.New("no such topic")

// Run waits for the topic, polling with backoff, then consumes until ctx ends.
func (g *waitingConsumer[T]) Run(ctx context.Context) error {
	g.waiting.Store(true)
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(time.Second),
		backoff.WithMaxInterval(30*time.Second), backoff.WithMaxElapsedTime(0))
	logged := false
	err := backoff.Retry(func() error {
		err := g.exists(ctx)
		if err != nil && !logged && ctx.Err() == nil {
			g.log.Info(g.what+" topic not readable yet; consuming it once it is", zap.String("topic", g.topic), zap.Error(err))
			logged = true
		}
		return err
	}, backoff.WithContext(bo, ctx))
	if err != nil {
		return nil // stopped while waiting: nothing was consumed
	}
	g.waiting.Store(false)
	return g.Consumer.Run(ctx)
}

func (g *waitingConsumer[T]) exists(ctx context.Context) error {
	meta, err := g.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{g.topic}})
	if err != nil {
		return err
	}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return t.Error
		}
		if len(t.Partitions) > 0 {
			return nil
		}
	}
	return fmt.Errorf("%s: %w", g.topic, errTopicMissing)
}

// Ready is the consumer's readiness, or nil while the topic is missing:
// payments need nothing of it.
func (g *waitingConsumer[T]) Ready(ctx context.Context) error {
	if g.waiting.Load() {
		return nil
	}
	return g.Consumer.Ready(ctx)
}
