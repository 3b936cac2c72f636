package app

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/shard"
)

// router is the consumer's decoder: the event contract, routed by merchant
// and quota shard, so that a merchant's shards run in parallel lanes.
type router struct {
	shards *shard.Cache
	// anyKey accepts any message key for a sharded merchant (WORKER_SHARDED_ANY_KEY).
	anyKey bool
}

func (r router) decode(m kafka.Message) (event.PaymentSucceeded, consumer.Route, error) {
	e, err := event.Decode(nil, m.Value)
	if err != nil {
		return event.PaymentSucceeded{}, consumer.Route{}, err
	}
	n := r.shards.Count(e.MerchantID)
	if !r.anyKey || n == 1 {
		if err := e.CheckKey(m.Key); err != nil {
			return event.PaymentSucceeded{}, consumer.Route{}, err
		}
	}
	return e, consumer.Route{Key: e.MerchantID, Shard: shard.Of(e.EventID, n)}, nil
}

// billingHandler runs a lane batch through the write path.
type billingHandler struct {
	deductor *deduct.Deductor
	metrics  *Metrics
	log      *zap.Logger
}

func (h *billingHandler) HandleBatch(ctx context.Context, items []consumer.Item[event.PaymentSucceeded]) ([]error, error) {
	events := make([]event.PaymentSucceeded, len(items))
	for i, it := range items {
		events[i] = it.Value
	}
	results, err := h.deductor.Apply(ctx, events)
	if err != nil {
		return nil, err // transient for the whole batch: the consumer retries it
	}
	now := time.Now()
	errs := make([]error, len(items))
	for i, r := range results {
		h.metrics.events.WithLabelValues(string(r.Outcome)).Inc()
		if r.Err != nil {
			errs[i] = r.Err // permanent: the consumer dead-letters it and logs why
			continue
		}
		if r.Outcome != deduct.Duplicate {
			h.metrics.lag.Observe(now.Sub(events[i].OccurredAt).Seconds())
		}
		if ce := h.log.Check(zap.DebugLevel, "event"); ce != nil {
			m := items[i].Msg
			ce.Write(zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset),
				zap.String("event_id", events[i].EventID), zap.String("merchant_id", events[i].MerchantID),
				zap.String("outcome", string(r.Outcome)), zap.Int64("balance_after", r.BalanceAfter))
		}
	}
	return errs, nil
}
