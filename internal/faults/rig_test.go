package faults

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/shard"
	"github.com/quotaflow/billing/internal/testenv"
)

// Timings of every scenario: short enough that a lost lock, a lapsed lease and
// a dead group member are noticed within seconds.
const (
	lockTTL        = 2 * time.Second
	leaseTTL       = 3 * time.Second
	sessionTimeout = 6 * time.Second // broker-side, see shortenSessions
	maxInFlight    = 256             // WORKER_MAX_INFLIGHT: bounds the redelivery of one crash
	operatorID     = 1023            // the test's own Snowflake worker ID, for grants
)

// rigOptions choose the services of a scenario.
type rigOptions struct {
	partitions int
	// redisAddrs are redis-servers of the test's own (several: a Cluster);
	// nil means the shared Redis under a key prefix of the test's own.
	redisAddrs []string
	// mariadb is a mariadbd of the test's own; nil means a database of the
	// test's own on the shared server.
	mariadb *testenv.MariaDB
}

// rig is one scenario's slice of Kafka, MySQL and Redis, the environment of
// its workers, and the operator's tools (grants, the reconciler).
type rig struct {
	t         *testing.T
	kafka     *testenv.Kafka
	topic     string
	dlqTopic  string
	group     string
	db        *testenv.MySQL
	rdb       redis.UniversalClient
	keys      keyspace.Keyspace
	env       map[string]string
	transport *kafka.Transport
	locks     *lock.Client
	granter   *deduct.Deductor
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	g := &rig{t: t, kafka: testenv.NewKafka(t)}
	g.topic = g.kafka.Topic(t, o.partitions)
	g.dlqTopic = g.kafka.Topic(t, 2)
	g.group = g.topic + "-group"
	g.transport = &kafka.Transport{}
	t.Cleanup(g.transport.CloseIdleConnections)
	if g.kafka.Cluster != nil {
		shortenSessions(g.kafka.Cluster, sessionTimeout)
		watchSessions(t, g.kafka.Cluster, g.group, g.client(), g.kafka.Brokers[0])
	}
	if o.redisAddrs == nil {
		r := testenv.NewRedis(t)
		o.redisAddrs, g.rdb, g.keys = []string{r.Addr}, r.Client, r.Keys
	} else {
		g.rdb = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: o.redisAddrs, IsClusterMode: len(o.redisAddrs) > 1})
		t.Cleanup(func() { g.rdb.Close() })
		keys, err := keyspace.New(testenv.UniqueName(t, "f") + ":")
		if err != nil {
			t.Fatal(err)
		}
		g.keys = keys
	}
	if o.mariadb != nil {
		g.db = o.mariadb.NewMySQL(t)
	} else {
		g.db = testenv.NewMySQL(t)
	}
	g.env = map[string]string{
		"KAFKA_BROKERS": strings.Join(g.kafka.Brokers, ","), "KAFKA_TOPIC": g.topic, "KAFKA_DLQ_TOPIC": g.dlqTopic,
		"KAFKA_GROUP": g.group, "REDIS_ADDR": strings.Join(o.redisAddrs, ","), "REDIS_KEY_PREFIX": g.keys.Prefix(),
		"MYSQL_DSN": g.db.DSN, "MYSQL_MAX_OPEN_CONNS": "8", "LOG_LEVEL": "info",
		"LOCK_TTL": lockTTL.String(), "IDGEN_LEASE_TTL": leaseTTL.String(), "SHUTDOWN_TIMEOUT": "5s",
		"KAFKA_SESSION_TIMEOUT": sessionTimeout.String(),
		"WORKER_LANES":          "8", "WORKER_LATENCY_BUDGET": "2ms", "WORKER_COMMIT_INTERVAL": "200ms",
		"WORKER_MAX_INFLIGHT": fmt.Sprint(maxInFlight),
	}
	g.granter = g.newGranter()
	return g
}

// shortenSessions makes the broker treat every group member as if it had
// asked for a session and rebalance timeout of d (kafka-go asks for 30s, and
// the consumer does not expose it): a killed worker is evicted after d rather
// than 30s, so a scenario can kill several in a minute. The control only
// edits the request; the broker then handles it as usual.
func shortenSessions(c *kfake.Cluster, d time.Duration) {
	ms := int32(d / time.Millisecond)
	c.ControlKey(kmsg.JoinGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if j, ok := req.(*kmsg.JoinGroupRequest); ok {
			j.SessionTimeoutMillis = ms
			j.RebalanceTimeoutMillis = ms
		}
		return nil, nil, false
	})
}

// requireFaultHooks skips (fails under BILLING_REQUIRE_INTEGRATION=1) a scenario
// that injects broker faults when KAFKA_BROKERS names an external broker: only
// the in-process one has hooks.
func (g *rig) requireFaultHooks() *kfake.Cluster {
	g.t.Helper()
	return g.kafka.FaultHooks(g.t)
}

// workerEnv is the environment of worker id, with overrides.
func (g *rig) workerEnv(id int, override map[string]string) map[string]string {
	env := maps.Clone(g.env)
	env["IDGEN_WORKER_ID"] = fmt.Sprint(id)
	maps.Copy(env, override)
	return env
}

func (g *rig) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(g.kafka.Brokers...), Timeout: 10 * time.Second, Transport: g.transport}
}

// newGranter builds the operator's write path (the same Deductor the workers
// run) under a Snowflake worker ID no worker uses, for grants.
func (g *rig) newGranter() *deduct.Deductor {
	g.t.Helper()
	locks, err := lock.New(g.rdb, lock.Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { locks.Close() })
	g.locks = locks
	gen, err := idgen.New(operatorID, idgen.Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	store, err := ledgerdb.New(g.db.SQL, snowflakes{gen}, nil, ledgerdb.Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	d, err := deduct.New(g.rdb, g.keys, deduct.MerchantLocks(locks, g.keys, lockTTL), store, zap.NewNop(), nil,
		deduct.Options{Shards: shard.NewCache(shard.NewStore(g.db.SQL), 0, nil)})
	if err != nil {
		g.t.Fatal(err)
	}
	return d
}

// grant credits each merchant with amount, under grant ids unique to tag.
func (g *rig) grant(ctx context.Context, tag string, merchants []string, amount int64) {
	g.t.Helper()
	for _, m := range merchants {
		if _, err := g.granter.Grant(ctx, m, amount, "grant-"+tag+"-"+m); err != nil {
			g.t.Fatalf("grant %s to %s: %v", tag, m, err)
		}
	}
}

// grantTraffic funds the merchants of a scenario: most generously, two
// barely, and the last one never (unknown merchant). Of the two poor ones the
// first may go down to -20 (floor: insufficient below it), the second owes
// overage without limit: every scenario runs every overdraft policy.
func (g *rig) grantTraffic(ctx context.Context, merchants []string, generous int64) {
	g.t.Helper()
	n := len(merchants)
	switch {
	case n >= 6:
		g.grant(ctx, "rich", merchants[:n-3], generous)
		g.grant(ctx, "poor", merchants[n-3:n-1], 5)
		for m, p := range map[string]ledger.Policy{
			merchants[n-3]: {Kind: ledger.PolicyFloor, Floor: 20},
			merchants[n-2]: {Kind: ledger.PolicyOverage},
		} {
			if err := g.granter.SetPolicy(ctx, m, p); err != nil {
				g.t.Fatalf("policy of %s: %v", m, err)
			}
		}
	case n > 0:
		g.grant(ctx, "rich", merchants, generous)
	}
}

type snowflakes struct{ gen *idgen.Generator }

func (s snowflakes) NextIDs(dst []int64) error {
	ids := make([]idgen.ID, len(dst))
	if err := s.gen.NextIDs(ids); err != nil {
		return err
	}
	for i, id := range ids {
		dst[i] = int64(id)
	}
	return nil
}
