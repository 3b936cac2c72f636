package worker

import (
	"context"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/shard"
)

// router is the consumer's decoder: the event contract, routed by merchant
// and quota shard, so that a merchant's shards run in parallel lanes.
type router struct {
	shards *shard.Cache
	// anyKey accepts any message key for a sharded merchant
	// (WORKER_SHARDED_ANY_KEY): the handler's keys judge it.
	anyKey bool
}

func (r router) decode(m kafka.Message) (event.PaymentSucceeded, consumer.Route, error) {
	e, err := event.Decode(nil, m.Value)
	if err != nil {
		return event.PaymentSucceeded{}, consumer.Route{}, err
	}
	if !r.anyKey {
		if err := e.CheckKey(m.Key); err != nil {
			return event.PaymentSucceeded{}, consumer.Route{}, err
		}
	}
	n := r.shards.Count(e.MerchantID)
	return e, consumer.Route{Key: e.MerchantID, Shard: shard.Of(e.EventID, n)}, nil
}

// anyKeys judges, with WORKER_SHARDED_ANY_KEY, the message keys decode let
// through: a key other than the merchant_id is invalid only for a merchant
// MySQL says is not sharded (one shard, not folding from more). The cached
// counts may accept a key (a stale "sharded" only routes for a moment), never
// refuse one: a cache behind a resharding must not make a valid event poison.
// Keys that match, or merchants the cache holds sharded, cost no query.
type anyKeys struct{ shards *shard.Cache }

// check returns the items' key errors (permanent; nil when none), or an
// outage for the whole batch when MySQL cannot be read.
func (a anyKeys) check(ctx context.Context, items []consumer.Item[event.PaymentSucceeded]) ([]error, error) {
	var doubt []string
	for _, it := range items {
		if a.shards.Count(it.Value.MerchantID) == 1 && it.Value.CheckKey(it.Msg.Key) != nil {
			doubt = append(doubt, it.Value.MerchantID)
		}
	}
	if len(doubt) == 0 {
		return nil, nil
	}
	layouts, err := a.shards.Layouts(ctx, slices.Compact(slices.Sorted(slices.Values(doubt))))
	if err != nil {
		return nil, failure.Outage(err) // no message's fault: it never dead-letters one
	}
	var errs []error
	for i, it := range items {
		if l, read := layouts[it.Value.MerchantID]; !read || l.Sharded() {
			continue
		}
		if err := it.Value.CheckKey(it.Msg.Key); err != nil {
			if errs == nil {
				errs = make([]error, len(items))
			}
			errs[i] = failure.Permanent(failure.ClassInvalid, err)
		}
	}
	return errs, nil
}

// decodeGrant is the grants consumer's decoder, routed by merchant.
func decodeGrant(m kafka.Message) (event.GrantCommand, consumer.Route, error) {
	g, err := event.DecodeGrant(m.Key, m.Value)
	if err != nil {
		return event.GrantCommand{}, consumer.Route{}, err
	}
	return g, consumer.Route{Key: g.MerchantID}, nil
}

// billingHandler runs a lane batch through the write path.
type billingHandler struct {
	deductor *deduct.Deductor
	keys     *anyKeys // nil: decode checked every key
	metrics  *Metrics
	log      *zap.Logger
	granted  func() // after a grant batch: its expiries may come sooner than any known (nil: none)
}

func (h *billingHandler) HandleBatch(ctx context.Context, items []consumer.Item[event.PaymentSucceeded]) ([]error, error) {
	if h.keys != nil {
		bad, err := h.keys.check(ctx, items)
		if err != nil {
			return nil, err // MySQL unread: the batch waits
		}
		if bad != nil {
			return h.handleValid(ctx, items, bad)
		}
	}
	return h.handle(ctx, items)
}

// handleValid handles the items without an error in bad: bad's are theirs.
func (h *billingHandler) handleValid(ctx context.Context, items []consumer.Item[event.PaymentSucceeded], bad []error) ([]error, error) {
	var valid []consumer.Item[event.PaymentSucceeded]
	var at []int // valid[j] is items[at[j]]
	for i, it := range items {
		if bad[i] == nil {
			valid, at = append(valid, it), append(at, i)
		}
	}
	if len(valid) == 0 {
		return bad, nil
	}
	errs, err := h.handle(ctx, valid)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		bad[i] = errs[j]
	}
	return bad, nil
}

func (h *billingHandler) handle(ctx context.Context, items []consumer.Item[event.PaymentSucceeded]) ([]error, error) {
	events := values(items)
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
		logResult(h.log, "event", items[i].Msg, zap.String("event_id", events[i].EventID), events[i].MerchantID, r)
	}
	return errs, nil
}

// values returns the decoded values of a lane batch.
func values[T any](items []consumer.Item[T]) []T {
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

// logResult writes a done message's outcome at debug level.
func logResult(log *zap.Logger, msg string, m kafka.Message, id zap.Field, merchantID string, r deduct.Result) {
	if ce := log.Check(zap.DebugLevel, msg); ce != nil {
		ce.Write(zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset),
			id, zap.String("merchant_id", merchantID), zap.String("outcome", string(r.Outcome)), zap.Int64("balance_after", r.BalanceAfter))
	}
}

// grantHandler runs a lane batch of grant commands through the grant path of
// billingctl (deduct.GrantBatch): one transaction for the batch.
type grantHandler billingHandler

func (h *grantHandler) HandleBatch(ctx context.Context, items []consumer.Item[event.GrantCommand]) ([]error, error) {
	grants := values(items)
	results, err := h.deductor.GrantBatch(ctx, grants)
	if err != nil {
		return nil, err // for the whole batch: the consumer retries it, or splits it if permanent
	}
	if h.granted != nil {
		h.granted()
	}
	errs := make([]error, len(items))
	for i, r := range results {
		h.metrics.grants.WithLabelValues(string(r.Outcome)).Inc()
		if errs[i] = r.Err; r.Err == nil { // else permanent: the consumer dead-letters it and logs why
			logResult(h.log, "grant", items[i].Msg, zap.String("grant_id", grants[i].GrantID), grants[i].MerchantID, r)
		}
	}
	return errs, nil
}
