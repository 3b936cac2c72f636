package app

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/testenv"
)

// Events go to the lane of their merchant and shard; a key other than the
// merchant_id is accepted only for a sharded merchant, and only when the
// worker opted in (WORKER_SHARDED_ANY_KEY).
func TestRouterRoutesByMerchantAndShard(t *testing.T) {
	db := testenv.NewMySQL(t)
	if _, err := db.SQL.Exec("INSERT INTO merchant_shards (merchant_id, shards) VALUES ('m-hot', 8)"); err != nil {
		t.Fatal(err)
	}
	cache := shard.NewCache(shard.NewStore(db.SQL), 0, nil)
	if err := cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	msg := func(key, merchant string) kafka.Message {
		e := event.PaymentSucceeded{EventID: "evt-7", PaymentID: "pay-7", MerchantID: merchant, Amount: 1,
			Source: event.SourcePC, OccurredAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		return kafka.Message{Key: []byte(key), Value: e.Encode()}
	}
	for _, tc := range []struct {
		name          string
		anyKey        bool
		key, merchant string
		want          consumer.Route
		invalid       bool
	}{
		{"unsharded, keyed by merchant", false, "m-1", "m-1", consumer.Route{Key: "m-1"}, false},
		{"sharded, keyed by merchant", false, "m-hot", "m-hot", consumer.Route{Key: "m-hot", Shard: shard.Of("evt-7", 8)}, false},
		{"sharded, other key, not opted in", false, "pay-7", "m-hot", consumer.Route{}, true},
		{"sharded, other key, opted in", true, "pay-7", "m-hot", consumer.Route{Key: "m-hot", Shard: shard.Of("evt-7", 8)}, false},
		{"unsharded, other key, opted in", true, "pay-7", "m-1", consumer.Route{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, route, err := router{shards: cache, anyKey: tc.anyKey}.decode(msg(tc.key, tc.merchant))
			if (err != nil) != tc.invalid || route != tc.want {
				t.Errorf("route %+v, error %v; want %+v, invalid %v", route, err, tc.want, tc.invalid)
			}
		})
	}
}
