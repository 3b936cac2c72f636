package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// The lock on a Redis Cluster of three masters: keys of many slots, the
// fencing script on the lock and quota keys of one merchant (no CROSSSLOT),
// waiting, and loss detection.
func TestCluster(t *testing.T) {
	addrs := testenv.StartRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	keys, err := keyspace.New("locktest:")
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := newClient(t, rdb, lock.Options{})
	waiter, _ := newClient(t, rdb, lock.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	nodes := map[string]bool{}
	for i := range 12 {
		m := fmt.Sprintf("m-%d", i)
		lockKey, quotaKey := keys.Lock(m), keys.Quota(m)
		node, err := rdb.MasterForKey(ctx, lockKey)
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
		if err := rdb.HSet(ctx, quotaKey, "remain", 10).Err(); err != nil {
			t.Fatal(err)
		}

		l, err := holder.Obtain(ctx, lockKey, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if remain, err := deduct(ctx, rdb, l, quotaKey, 3); err != nil || remain != 7 {
			t.Fatalf("%s: deduct = %d, %v; want 7", m, remain, err)
		}

		got := make(chan error, 1)
		go func() {
			l2, err := waiter.Wait(ctx, []string{lockKey}, time.Minute)
			if err == nil {
				err = l2.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: waiter: %v", m, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: waiter did not get the released lock", m)
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("keys landed on %d node(s); want several", len(nodes))
	}

	// Many keys of many slots in one pipelined round trip each way: taken
	// (one already held, so Wait waits for it), renewed across nodes, one
	// lost, the rest released.
	var many []string
	for i := range 12 {
		many = append(many, keys.Lock(fmt.Sprintf("m-%d", i)))
	}
	slices.Sort(many)
	busy, err := holder.Obtain(ctx, many[5], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lock, 1)
	go func() {
		l, err := waiter.Wait(ctx, many, 600*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	if err := busy.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	time.Sleep(time.Second) // renewed across nodes
	if l.Context().Err() != nil {
		t.Fatalf("lock context ended: %v", context.Cause(l.Context()))
	}
	for _, k := range many {
		if got := rdb.Get(ctx, k).Val(); got != l.Token() {
			t.Fatalf("%s = %q, want the token", k, got)
		}
	}
	if err := rdb.Del(ctx, many[7]).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Context(), 600*time.Millisecond)
	requireLost(t, l, true)
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release: err = %v, want ErrNotHeld", err)
	}
	for _, k := range many {
		if rdb.Exists(ctx, k).Val() != 0 {
			t.Fatalf("%s still held after Release", k)
		}
	}
}
