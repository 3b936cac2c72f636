package app

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
)

// decode is the consumer's decoder: the event contract, routed by merchant.
func decode(m kafka.Message) (event.PaymentSucceeded, string, error) {
	e, err := event.Decode(m.Key, m.Value)
	if err != nil {
		return event.PaymentSucceeded{}, "", err
	}
	return e, e.MerchantID, nil
}

// decodeGrant is the grants consumer's decoder, routed by merchant.
func decodeGrant(m kafka.Message) (event.GrantCommand, string, error) {
	g, err := event.DecodeGrant(m.Key, m.Value)
	if err != nil {
		return event.GrantCommand{}, "", err
	}
	return g, g.MerchantID, nil
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

// grantHandler runs a lane batch of grant commands through the grant path of
// billingctl (deduct.GrantBatch): one transaction for the batch.
type grantHandler struct {
	deductor *deduct.Deductor
	metrics  *Metrics
	log      *zap.Logger
}

func (h *grantHandler) HandleBatch(ctx context.Context, items []consumer.Item[event.GrantCommand]) ([]error, error) {
	grants := make([]event.GrantCommand, len(items))
	for i, it := range items {
		grants[i] = it.Value
	}
	results, err := h.deductor.GrantBatch(ctx, grants)
	if err != nil {
		return nil, err // for the whole batch: the consumer retries it, or splits it if permanent
	}
	errs := make([]error, len(items))
	for i, r := range results {
		h.metrics.grants.WithLabelValues(string(r.Outcome)).Inc()
		errs[i] = r.Err // permanent: the consumer dead-letters it and logs why
		if ce := h.log.Check(zap.DebugLevel, "grant"); r.Err == nil && ce != nil {
			m := items[i].Msg
			ce.Write(zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset),
				zap.String("grant_id", grants[i].GrantID), zap.String("merchant_id", grants[i].MerchantID),
				zap.String("outcome", string(r.Outcome)), zap.Int64("balance_after", r.BalanceAfter))
		}
	}
	return errs, nil
}
