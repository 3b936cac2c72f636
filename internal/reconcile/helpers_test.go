package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// env is a real Redis prefix and a real migrated database of the test's own.
type env struct {
	t     testing.TB
	ctx   context.Context
	redis *testenv.Redis
	my    *testenv.MySQL
	locks *lock.Client
	seq   atomic.Int64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	r := testenv.NewRedis(t)
	my := testenv.NewMySQL(t)
	lc, err := lock.New(r.Client, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close() })
	return &env{t: t, ctx: context.Background(), redis: r, my: my, locks: lc}
}

// reconciler returns a Reconciler on the env with test-friendly defaults.
func (e *env) reconciler(cfg Config) (*Reconciler, *prometheus.Registry) {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Metrics = m
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(e.t)
	}
	if cfg.BusyRetryDelay == 0 {
		cfg.BusyRetryDelay = 20 * time.Millisecond
	}
	r, err := New(e.my.SQL, e.redis.Client, e.redis.Keys, NewLocker(e.locks), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, reg
}

// sfID is a Snowflake id at time at, unique within the env.
func (e *env) sfID(at time.Time) int64 {
	const timeShift = idgen.WorkerBits + idgen.SequenceBits
	return (at.UnixMilli()-idgen.EpochUnixMilli)<<timeShift | e.seq.Add(1)&(1<<timeShift-1)
}

// merchant creates a balance row and a consistent ledger (one credit row, one
// debit row when debited > 0), an hour old.
func (e *env) merchant(m string, credited, debited int64) {
	e.t.Helper()
	e.exec("INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES (?,?,?)", m, credited, debited)
	at := time.Now().Add(-time.Hour)
	if credited > 0 {
		e.ledger(e.sfID(at), "grant-"+m, m, "credit", credited)
	}
	if debited > 0 {
		e.ledger(e.sfID(at), "evt-old-"+m, m, "debit", debited)
	}
}

// ledger inserts a row with the merchant's next seq (none without a balance
// row), taken from its balance row as the ledger writer does; the totals are
// the caller's to move.
func (e *env) ledger(id int64, eventID, m, kind string, amount int64) {
	e.t.Helper()
	e.inTx(func(tx *sql.Tx) {
		e.txExec(tx, "UPDATE merchant_balance SET seq = seq + 1 WHERE merchant_id = ?", m)
		e.txExec(tx, `INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, occurred_at, seq)
			SELECT ?, ?, ?, ?, ?, NOW(6), (SELECT seq FROM merchant_balance WHERE merchant_id = ?)`, id, eventID, m, kind, amount, m)
	})
}

// debit books a confirmed debit in MySQL as the worker would: a row and the balance.
func (e *env) debit(m, eventID string, amount int64, at time.Time) {
	e.t.Helper()
	e.ledger(e.sfID(at), eventID, m, "debit", amount)
	e.exec("UPDATE merchant_balance SET debited = debited + ? WHERE merchant_id = ?", amount, m)
}

// inTx runs fn in a transaction, committed when fn returns.
func (e *env) inTx(fn func(tx *sql.Tx)) {
	e.t.Helper()
	tx, err := e.my.SQL.BeginTx(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	fn(tx)
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) txExec(tx *sql.Tx, q string, args ...any) {
	e.t.Helper()
	if _, err := tx.ExecContext(e.ctx, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.my.SQL.ExecContext(e.ctx, q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// setQuota writes a quota hash: remain, ver and p:<id> = "<amount>:<ms>" pairs.
func (e *env) setQuota(m string, remain int64, ver int, pending ...any) {
	e.t.Helper()
	args := []any{"remain", remain, "ver", ver}
	for i := 0; i+2 < len(pending); i += 3 {
		args = append(args, "p:"+pending[i].(string), fmt.Sprintf("%d:%d", pending[i+1], pending[i+2].(time.Time).UnixMilli()))
	}
	e.setRaw(m, args...)
}

func (e *env) quota(m string) map[string]string {
	e.t.Helper()
	h, err := e.redis.Client.HGetAll(e.ctx, e.redis.Keys.Quota(m)).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// dumpRedis returns every key under the env's prefix with its DUMP.
func (e *env) dumpRedis() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	keys, err := e.redis.Client.Keys(e.ctx, e.redis.Keys.Prefix()+"*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range keys {
		v, err := e.redis.Client.Dump(e.ctx, k).Result()
		if err != nil {
			e.t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// auditFindings returns the stored findings of a run, ordered by merchant and kind.
func (e *env) auditFindings(runID int64) []Finding {
	e.t.Helper()
	rows, err := e.my.SQL.QueryContext(e.ctx, `SELECT merchant_id, kind, redis_value, expected, delta, pending, action, detail
		FROM reconcile_findings WHERE run_id = ? ORDER BY merchant_id, kind`, runID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		var f Finding
		var rv sql.NullInt64
		if err := rows.Scan(&f.MerchantID, &f.Kind, &rv, &f.Expected, &f.Delta, &f.Pending, &f.Action, &f.Detail); err != nil {
			e.t.Fatal(err)
		}
		if rv.Valid {
			f.RedisValue = &rv.Int64
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) count(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.my.SQL.QueryRowContext(e.ctx, q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// byMerchant indexes findings as "merchant kind" -> action.
func byMerchant(fs []Finding) map[string]Action {
	out := map[string]Action{}
	for _, f := range fs {
		out[f.MerchantID+" "+string(f.Kind)] = f.Action
	}
	return out
}

func sortedKeys(m map[string]Action) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mustRun(t testing.TB, r *Reconciler) *Report {
	t.Helper()
	rep := r.Run(context.Background())
	if rep.Err() != nil {
		t.Fatalf("run failed: %v", rep.Err())
	}
	return rep
}

// gauge returns the value of a counter or gauge without labels.
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// histSum returns the sum of the observations of a histogram without labels.
func histSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("histogram %s not found", name)
	return 0
}

// setRaw writes a quota hash field by field, as given: malformed ones too.
func (e *env) setRaw(tag string, kv ...any) {
	e.t.Helper()
	key := e.redis.Keys.Quota(tag)
	if err := e.redis.Client.Del(e.ctx, key).Err(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.redis.Client.HSet(e.ctx, key, kv...).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// deductor is a write path on the env's services, as a worker's.
func (e *env) deductor(opts deduct.Options) *deduct.Deductor {
	e.t.Helper()
	store, err := ledgerdb.New(e.my.SQL, &snowflakeIDs{}, nil, ledgerdb.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := deduct.New(e.redis.Client, e.redis.Keys, deduct.MerchantLocks(e.locks, e.redis.Keys, 10*time.Second), store, nil, nil, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
