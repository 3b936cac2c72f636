package bench

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// services returns an admin DSN for the test's MySQL server and a Redis
// whose test prefix the bench keys go under.
func services(t *testing.T) (string, *testenv.Redis) {
	t.Helper()
	m := testenv.NewEmptyMySQL(t) // reachability (skip or fail like every integration test)
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	return cfg.FormatDSN(), testenv.NewRedis(t)
}

func tinyConfig(t *testing.T) (Config, *testenv.Redis) {
	admin, r := services(t)
	cfg := DefaultConfig()
	cfg.AdminDSN = admin
	cfg.KeyPrefix = r.Keys.Prefix()
	cfg.Strategies = []string{NameRowLock, NameRedisPerEvent}
	cfg.Events = 400
	cfg.Merchants = 20
	cfg.Callers = 4
	return cfg, r
}

func runBench(t *testing.T, cfg Config, r *testenv.Redis) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, r.Client, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		if !res.OK() {
			t.Errorf("%s: error %q, check %+v", res.Strategy, res.Error, res.Check)
		}
		if res.Check.LedgerRows != int64(cfg.Events) || res.Check.Debits+res.Check.Rejected != int64(cfg.Events) {
			t.Errorf("%s: %d ledger rows (%d debits, %d rejected) for %d events",
				res.Strategy, res.Check.LedgerRows, res.Check.Debits, res.Check.Rejected, cfg.Events)
		}
		// Read from the server: any count, but per 100,000 events of this run.
		if d := res.Deadlocks; d.Server < 0 || d.Per100k != float64(d.Server)*100_000/float64(cfg.Events) {
			t.Errorf("%s: deadlocks %+v over %d events", res.Strategy, d, cfg.Events)
		}
		s, err := NewStrategy(res.Strategy, 0)
		if err != nil {
			t.Fatal(err)
		}
		if (res.Check.RedisOK != nil) != s.RedisBalances() {
			t.Errorf("%s: redis checked = %v", res.Strategy, res.Check.RedisOK != nil)
		}
	}
	if len(rep.Results) != len(cfg.Strategies) {
		t.Fatalf("%d results for %d strategies", len(rep.Results), len(cfg.Strategies))
	}
	if rep.Results[0].VsRowLock != 1 || rep.Results[1].VsRowLock <= 0 {
		t.Errorf("ratios to rowlock: %v, %v", rep.Results[0].VsRowLock, rep.Results[1].VsRowLock)
	}
	return rep
}

func TestTinyBenchPassesItsChecks(t *testing.T) {
	cfg, r := tinyConfig(t)
	rep := runBench(t, cfg, r)
	for _, res := range rep.Results {
		if res.Check.Rejected != 0 {
			t.Errorf("%s rejected %d events with ample quota", res.Strategy, res.Check.Rejected)
		}
	}
	// Nothing is left behind: databases dropped, keys deleted.
	admin, err := sql.Open("mysql", cfg.AdminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, res := range rep.Results {
		var n int
		if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", res.Database).Scan(&n); err != nil || n != 0 {
			t.Errorf("database %s still exists (%v)", res.Database, err)
		}
	}
	if keys, err := r.Client.Keys(context.Background(), r.Keys.Prefix()+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys left under %s: %v (%v)", r.Keys.Prefix(), keys, err)
	}
}

// With little quota, merchants run dry: rejections are recorded, nothing is
// overdrawn, by every strategy (the pipeline's lane batches included).
func TestLimitedQuotaRejectsWithoutOverdraft(t *testing.T) {
	cfg, r := tinyConfig(t)
	cfg.Strategies = StrategyNames()
	cfg.Batch = 16
	cfg.Events, cfg.Merchants, cfg.Quota = 300, 10, 60
	cfg.Skew = workload.Skew{Kind: workload.Hot, Param: 0.5}
	rep := runBench(t, cfg, r)
	for _, res := range rep.Results {
		if res.Check.Rejected == 0 || res.Check.Debits == 0 {
			t.Errorf("%s: %d debits, %d rejected: want both with 60 units for ~30 events of ~5.5", res.Strategy, res.Check.Debits, res.Check.Rejected)
		}
	}
}

// --keep leaves the database and the Redis balances for inspection, and they agree.
func TestKeepLeavesStateBehind(t *testing.T) {
	cfg, r := tinyConfig(t)
	cfg.Strategies = []string{NameRedisPerEvent}
	cfg.Events, cfg.Keep = 100, true
	ctx := context.Background()
	rep, err := Run(ctx, cfg, r.Client, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	admin, err := sql.Open("mysql", cfg.AdminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := scenario.DropDatabase(context.Background(), admin, res.Database); err != nil {
			t.Error(err)
		}
		admin.Close()
	})
	if !res.OK() {
		t.Fatalf("error %q, check %+v", res.Error, res.Check)
	}
	var debited int64
	if err := admin.QueryRow("SELECT SUM(debited) FROM `" + res.Database + "`.merchant_balance").Scan(&debited); err != nil {
		t.Fatal(err)
	}
	if debited != rep.Workload.TotalAmount {
		t.Fatalf("kept database debited %d, workload total %d", debited, rep.Workload.TotalAmount)
	}
	remain, err := r.Client.HGet(ctx, res.KeyPrefix+"quota:{"+workload.MerchantID(0)+"}", "remain").Int64()
	if err != nil || remain >= cfg.Quota {
		t.Fatalf("kept Redis remain of the hot merchant = %d, %v", remain, err)
	}
}
