package worker

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/testenv"
)

// Events go to the lane of their merchant and shard; a key other than the
// merchant_id is refused unless the worker opted in (WORKER_SHARDED_ANY_KEY),
// and then left to the handler's anyKeys, which asks MySQL.
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
		{"unsharded, other key, opted in", true, "pay-7", "m-1", consumer.Route{Key: "m-1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, route, err := router{shards: cache, anyKey: tc.anyKey}.decode(msg(tc.key, tc.merchant))
			if (err != nil) != tc.invalid || route != tc.want {
				t.Errorf("route %+v, error %v; want %+v, invalid %v", route, err, tc.want, tc.invalid)
			}
		})
	}
}

// anyKeys refuses a key other than the merchant_id only for a merchant MySQL
// says has one shard and folds none: not for one the cache does not know is
// sharded yet, nor one folding from more shards. Matching keys and merchants
// the cache holds sharded cost no query; MySQL unread is an outage, never an
// event's fault.
func TestAnyKeysJudgedByMySQL(t *testing.T) {
	ctx := context.Background()
	db := testenv.NewMySQL(t)
	if _, err := db.SQL.Exec("INSERT INTO merchant_shards (merchant_id, shards) VALUES ('m-hot', 8)"); err != nil {
		t.Fatal(err)
	}
	cache := shard.NewCache(shard.NewStore(db.SQL), 0, nil)
	if err := cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// After the cache's read: resharded to 4, and folding back to 1 from 4.
	if _, err := db.SQL.Exec("INSERT INTO merchant_shards (merchant_id, shards, folding_from) VALUES ('m-new', 4, 1), ('m-back', 1, 4)"); err != nil {
		t.Fatal(err)
	}
	item := func(key, merchant string) consumer.Item[event.PaymentSucceeded] {
		m := paymentMsg("evt-"+key+"-"+merchant, merchant, 1)
		m.Key = []byte(key)
		e, err := event.Decode(nil, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		return consumer.Item[event.PaymentSucceeded]{Msg: m, Value: e}
	}
	items := []consumer.Item[event.PaymentSucceeded]{
		item("m-1", "m-1"), item("pay-1", "m-1"), item("pay-2", "m-hot"), item("pay-3", "m-new"), item("pay-4", "m-back"), item("", "m-1"),
	}
	errs, err := anyKeys{shards: cache}.check(ctx, items)
	if err != nil || len(errs) != len(items) {
		t.Fatalf("check = %v, %v", errs, err)
	}
	for i, err := range errs {
		if (err != nil) != (i == 1) {
			t.Errorf("item %d (key %q of %s): %v", i, items[i].Msg.Key, items[i].Value.MerchantID, err)
		}
	}
	if failure.ClassOf(errs[1]) != failure.ClassInvalid || errs[1].Error() != `event: invalid key: message key "pay-1" does not match merchant_id "m-1"` {
		t.Errorf("the foreign key of m-1: %s %v", failure.ClassOf(errs[1]), errs[1])
	}

	dead, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/billing?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })
	unread := anyKeys{shards: shard.NewCache(shard.NewStore(dead), 0, nil)}
	if errs, err := unread.check(ctx, items[:1]); errs != nil || err != nil {
		t.Errorf("a matching key with MySQL down: %v, %v; want no query", errs, err)
	}
	if errs, err := unread.check(ctx, items[1:2]); errs != nil || !failure.IsOutage(err) || failure.IsPermanent(err) {
		t.Errorf("a foreign key with MySQL down: %v, %v; want an outage for the batch", errs, err)
	}
}

// With WORKER_SHARDED_ANY_KEY, a merchant resharded a moment ago gets events
// keyed by payment_id before the worker's cached shard counts say it is
// sharded (they refresh every second): MySQL's layout decides, so none is
// dead-lettered and each is recorded once. A merchant MySQL says has one
// shard, keyed by anything but its id, is invalid as before.
func TestAnyKeyJudgedByMySQLNotTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	g.env["WORKER_SHARDED_ANY_KEY"] = "true"
	w := g.start(1, Options{NoHTTP: true})
	grantAll(t, w.Worker, []string{"m-hot", "m-flat"}, 1000)
	g.produce(ctx, []kafka.Message{paymentMsg("warm", "m-hot", 1)})
	g.drain(ctx) // consuming, with m-hot cached as unsharded

	if _, err := w.path.Deductor.Reshard(ctx, "m-hot", 4); err != nil { // billingctl quota shards
		t.Fatal(err)
	}
	const n = 60
	msgs := make([]kafka.Message, 0, n+1)
	for i := range n {
		m := paymentMsg(fmt.Sprintf("hot-%d", i), "m-hot", 2)
		m.Key = []byte(fmt.Sprintf("pay-hot-%d", i))
		msgs = append(msgs, m)
	}
	flat := paymentMsg("flat-1", "m-flat", 2)
	flat.Key = []byte("pay-flat-1")
	g.produce(ctx, append(msgs, flat))
	g.drain(ctx)

	dead := map[string]dlq.Record{}
	for _, r := range g.dlqRecords(ctx) {
		dead[r.Provenance()] = r
	}
	for _, r := range dead {
		if r.Class != dlq.ClassInvalid || string(r.Key) != "pay-flat-1" ||
			r.Message != `event: invalid key: message key "pay-flat-1" does not match merchant_id "m-flat"` {
			t.Errorf("dead-lettered %q: %s %q", r.Key, r.Class, r.Message)
		}
	}
	if len(dead) != 1 {
		t.Fatalf("%d messages dead-lettered, want only m-flat's", len(dead))
	}
	var rows, events int64
	g.db.DB.Raw("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM quota_ledger WHERE merchant_id = 'm-hot' AND kind = 'debit'").Row().Scan(&rows, &events)
	if rows != n+1 || events != n+1 {
		t.Errorf("m-hot: %d debit rows of %d events, want %d of %d", rows, events, n+1, n+1)
	}
	if b, err := w.path.Ledger.Balances(ctx, []string{"m-hot"}); err != nil || b["m-hot"].Available() != 1000-1-2*n {
		t.Errorf("m-hot: balance %+v, %v; want %d available", b["m-hot"], err, 1000-1-2*n)
	}
}
