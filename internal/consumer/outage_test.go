package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/testenv"
)

// While a dependency is down (probe failing, handler failing) nothing is
// dead-lettered or committed, fetch stops at the in-flight window, and Ready
// names the dependency; once it is back everything is handled and committed.
func TestOutageRetriesWithoutDeadLetters(t *testing.T) {
	c := newCluster(t)
	const parts, n = 3, 600
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, 30)
	c.produce(t, topic, msgs)

	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	ok := rec.handler(0)
	h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		if down.Load() {
			if len(items) > 1 {
				return nil, errors.New("redis: connection refused")
			}
			return []error{errors.New("redis: connection refused")}, nil
		}
		return ok(ctx, items)
	})
	probe := func(context.Context) error {
		if down.Load() {
			return errors.New("redis: dial tcp 127.0.0.1:6379: connect: connection refused")
		}
		return nil
	}
	cfg := c.config(topic, dlqTopic)
	cfg.MaxInFlightPerPartition = 32
	r := start(t, cfg, h, probe)

	// Long enough for many more failures than MaxAttempts.
	waitFor(t, 10*time.Second, "outage retries", func() bool { return value(t, r.m.retries.WithLabelValues(retryOutage)) >= 40 })
	err := r.c.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "retrying since") {
		t.Fatalf("Ready during outage = %v", err)
	}
	if _, end := c.offsets(t, dlqTopic, 1); end[0] != 0 {
		t.Fatalf("%d records dead-lettered during an outage", end[0])
	}
	for p, off := range c.committed(t, cfg.Group, topic, parts) {
		if off > 0 {
			t.Fatalf("partition %d committed %d during an outage with nothing handled", p, off)
		}
	}
	// Backpressure: each partition stops fetching at its window (+1 waiting).
	if got, most := value(t, r.m.consumed), float64(parts*(cfg.MaxInFlightPerPartition+1)); got > most {
		t.Errorf("fetched %v messages during the outage, window allows %v", got, most)
	}
	if got := value(t, r.m.retries.WithLabelValues(retryItem)); got != 0 {
		t.Errorf("%v attempts counted during an outage", got)
	}

	down.Store(false)
	waitFor(t, 15*time.Second, "all handled after recovery", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "ready after recovery", func() bool { return r.c.Ready(context.Background()) == nil })
	r.stop(t)
	rec.checkOrder(t, perKey)
	if _, end := c.offsets(t, dlqTopic, 1); end[0] != 0 {
		t.Errorf("%d records dead-lettered", end[0])
	}
}

// Errors that describe a server fail every batch while the probe, pinging a
// healthy node, says all is well (the worker started before the migration, a
// failed-over primary, a Redis Cluster with one shard down): the consumer
// must see an outage in the error itself. Nothing is dead-lettered or counted
// after many more tries than MaxAttempts, Ready names the error, and once
// the server is back everything is handled and committed.
func TestServerErrorsAreOutagesWithHealthyProbe(t *testing.T) {
	rdb := testenv.NewRedis(t).Client
	// A real go-redis error value: the reply parsed and typed by the client.
	clusterDown := rdb.Eval(context.Background(), "return redis.error_reply('CLUSTERDOWN The cluster is down')", nil).Err()
	if clusterDown == nil {
		t.Fatal("no CLUSTERDOWN error from Redis")
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // in Ready
	}{
		{"mysql 1146 table missing", fmt.Errorf("ledger: existing events: %w", &mysql.MySQLError{Number: 1146,
			SQLState: [5]byte{'4', '2', 'S', '0', '2'}, Message: "Table 'billing.quota_ledger' doesn't exist"}), "Error 1146"},
		{"mysql 1290 read-only", fmt.Errorf("ledger: commit: %w", &mysql.MySQLError{Number: 1290,
			SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"}), "Error 1290"},
		{"redis CLUSTERDOWN", fmt.Errorf("deduct: lock 3 merchants: %w", clusterDown), "CLUSTERDOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			const parts, n = 2, 200
			topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
			msgs, perKey := events(n, 10)
			c.produce(t, topic, msgs)

			var down atomic.Bool
			down.Store(true)
			var tries atomic.Int64 // calls that saw the first message of partition 0
			rec := newRecorder()
			ok := rec.handler(0)
			h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
				if down.Load() {
					for _, it := range items {
						if it.Msg.Partition == 0 && it.Msg.Offset == 0 {
							tries.Add(1)
						}
					}
					if len(items) > 1 {
						return nil, tc.err
					}
					return []error{tc.err}, nil
				}
				return ok(ctx, items)
			})
			cfg := c.config(topic, dlqTopic)
			cfg.MaxAttempts = 3
			r := start(t, cfg, h, func(context.Context) error { return nil })

			waitFor(t, 15*time.Second, "many more tries than MaxAttempts", func() bool { return tries.Load() >= 5*int64(cfg.MaxAttempts) })
			err := r.c.Ready(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "retrying since") {
				t.Fatalf("Ready during the outage = %v, want it to name %q", err, tc.want)
			}
			if got := c.dlqSize(t, dlqTopic); got != 0 {
				t.Fatalf("%d records dead-lettered during an outage", got)
			}
			for p, off := range c.committed(t, cfg.Group, topic, parts) {
				if off > 0 {
					t.Fatalf("partition %d committed %d with nothing handled", p, off)
				}
			}
			for _, kind := range []string{retryItem, retrySplit} {
				if got := value(t, r.m.retries.WithLabelValues(kind)); got != 0 {
					t.Errorf("%v %s retries during an outage, want none", got, kind)
				}
			}

			down.Store(false)
			waitFor(t, 15*time.Second, "all handled after recovery", func() bool { return rec.distinct() == n })
			c.waitCommittedEnd(t, cfg.Group, topic, parts)
			waitFor(t, 5*time.Second, "ready after recovery", func() bool { return r.c.Ready(context.Background()) == nil })
			r.stop(t)
			rec.checkOrder(t, perKey)
			if got := c.dlqSize(t, dlqTopic); got != 0 {
				t.Errorf("%d records dead-lettered", got)
			}
		})
	}
}

// A message that fails alone for its own reason (others of its batch pass,
// the error describes no server) is still dead-lettered as exhausted, and
// the tries it spent in an outage before do not count: its record says
// exactly MaxAttempts.
func TestPoisonAfterOutageCountsOnlyItsOwnFailures(t *testing.T) {
	c := newCluster(t)
	const parts, n = 2, 100
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, _ := events(n, 10)
	bad := kafka.Message{Key: []byte("k-3"), Value: []byte("k-3:999:bad")}
	msgs = append([]kafka.Message{bad}, msgs...) // first of its lane: tried from the start
	c.produce(t, topic, msgs)

	var down atomic.Bool
	down.Store(true)
	var badTries atomic.Int64
	rec := newRecorder()
	missing := &mysql.MySQLError{Number: 1146, SQLState: [5]byte{'4', '2', 'S', '0', '2'}, Message: "Table 'billing.quota_ledger' doesn't exist"}
	h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		hasBad := false
		for _, it := range items {
			hasBad = hasBad || string(it.Msg.Value) == string(bad.Value)
		}
		if hasBad {
			badTries.Add(1)
		}
		switch {
		case down.Load():
			return nil, missing
		case hasBad:
			return nil, errors.New("deduct: WRONGTYPE Operation against a key holding the wrong kind of value")
		}
		for _, it := range items {
			rec.record(it)
		}
		return nil, nil
	})
	cfg := c.config(topic, dlqTopic)
	cfg.MaxAttempts = 3
	r := start(t, cfg, h, func(context.Context) error { return nil })

	waitFor(t, 15*time.Second, "the bad message tried through the outage", func() bool { return badTries.Load() >= 4*int64(cfg.MaxAttempts) })
	if got := c.dlqSize(t, dlqTopic); got != 0 {
		t.Fatalf("%d records dead-lettered during the outage", got)
	}
	down.Store(false)
	recs := c.readDLQ(t, dlqTopic, 1)
	waitFor(t, 15*time.Second, "the others handled", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	r.stop(t)
	if got := recs[0]; string(got.Value) != string(bad.Value) || got.Class != dlq.ClassExhausted || got.Attempts != cfg.MaxAttempts ||
		!strings.Contains(got.Message, "WRONGTYPE") {
		t.Fatalf("DLQ record %q class %s attempts %d message %q, want the bad message exhausted after %d attempts",
			got.Value, got.Class, got.Attempts, got.Message, cfg.MaxAttempts)
	}
	if got := c.dlqSize(t, dlqTopic); got != 1 {
		t.Errorf("DLQ holds %d records, want 1", got)
	}
}
