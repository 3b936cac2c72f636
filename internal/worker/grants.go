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
	"github.com/quotaflow/billing/internal/event"
)

// grantsConsumer consumes the grants topic once it exists. Joined while the
// topic is missing, kafka-go's group leader ends each generation at once (its
// partition watcher cannot read the topic) and the member rejoins in a loop.
type grantsConsumer struct {
	*consumer.Consumer[event.GrantCommand]
	topic   string
	client  *kafka.Client
	log     *zap.Logger
	waiting atomic.Bool // the topic is missing: nothing to consume, nothing unready
}

var errTopicMissing = errors.New("no such topic")

// Run waits for the topic, polling with backoff, then consumes until ctx ends.
func (g *grantsConsumer) Run(ctx context.Context) error {
	g.waiting.Store(true)
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(time.Second),
		backoff.WithMaxInterval(30*time.Second), backoff.WithMaxElapsedTime(0))
	logged := false
	err := backoff.Retry(func() error {
		err := g.exists(ctx)
		if err != nil && !logged && ctx.Err() == nil {
			g.log.Info("grants topic not readable yet; consuming it once it is", zap.String("topic", g.topic), zap.Error(err))
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

func (g *grantsConsumer) exists(ctx context.Context) error {
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
func (g *grantsConsumer) Ready(ctx context.Context) error {
	if g.waiting.Load() {
		return nil
	}
	return g.Consumer.Ready(ctx)
}
