package statement_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/statement"
	"github.com/quotaflow/billing/internal/testenv"
)

// base is the start of the hours the fixtures' rows are recorded in: row
// seq n of a merchant is recorded at base + n hours.
var base = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

type ids struct{ n atomic.Int64 }

func (c *ids) NextIDs(dst []int64) error {
	end := c.n.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = 1_000_000 + end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

// env is a test's database (with a store that writes it), Redis and lock client.
type env struct {
	db    *testenv.MySQL
	store *ledgerdb.Store
	redis *testenv.Redis
	locks *lock.Client
	dir   string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{db: testenv.NewMySQL(t), redis: testenv.NewRedis(t), dir: t.TempDir()}
	var err error
	if e.store, err = ledgerdb.New(e.db.SQL, &ids{}, nil, ledgerdb.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close() })
	if e.locks, err = lock.New(e.redis.Client, lock.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.locks.Close() })
	return e
}

// seed gives each merchant a grant of 100 and n debits of 1..n (with a
// rejection of 1000 after the first), then records row seq k at base + k hours.
func (e *env) seed(t testing.TB, merchants []string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, m := range merchants {
		if _, err := e.store.Grant(ctx, []ledger.Credit{{ID: "g-" + m, MerchantID: m, Amount: 100}}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= n; i++ {
			rows := []ledger.Row{debit(fmt.Sprintf("e-%s-%d", m, i), m, int64(i))}
			if i == 1 {
				r := debit("r-"+m, m, 1000)
				r.Kind, r.Reason = ledger.KindRejected, ledger.ReasonInsufficient
				rows = append(rows, r)
			}
			if err := e.store.Commit(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.db.SQL.Exec("UPDATE quota_ledger SET created_at = TIMESTAMPADD(HOUR, seq, ?) WHERE seq IS NOT NULL", base); err != nil {
		t.Fatal(err)
	}
}

func debit(event, merchant string, amount int64) ledger.Row {
	return ledger.Row{EventID: event, MerchantID: merchant, Kind: ledger.KindDebit, Amount: amount, Reason: ledger.ReasonPayment,
		PaymentID: "pay-" + event, Source: "pc", OccurredAt: base}
}

// hours is the period (base + from hours, base + to hours].
func hours(from, to int) ledger.Period {
	return ledger.Period{From: base.Add(time.Duration(from) * time.Hour), To: base.Add(time.Duration(to) * time.Hour)}
}

// proxied is a pool on the test's database through a proxy the test can pause.
func (e *env) proxied(t *testing.T) (*sql.DB, *testenv.Proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(e.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, p
}

// rowsQuery is in the statement that reads a page's ledger rows: a proxy
// paused at it holds an export inside its snapshot.
var rowsQuery = []byte("FORCE INDEX (quota_ledger_merchant_seq)")

func (e *env) export(ctx context.Context, db *sql.DB, o statement.Options) (statement.Summary, error) {
	if o.Out == "" {
		o.Out = e.dir
	}
	return statement.Export(ctx, db, e.locks, e.redis.Keys, o)
}

// records reads a JSONL export, checking its trailer's hash and line count.
func records(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) < 2 || len(lines[len(lines)-1]) != 0 {
		t.Fatalf("%s does not end in a line: %q", path, data)
	}
	lines = lines[:len(lines)-1]
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	tr := out[len(out)-1]
	sum := sha256.Sum256(data[:len(data)-len(lines[len(lines)-1])])
	if tr["record"] != "trailer" || tr["sha256"] != hex.EncodeToString(sum[:]) || tr["records"] != float64(len(lines)-1) {
		t.Fatalf("trailer %v; the %d lines before it hash to %x", tr, len(lines)-1, sum)
	}
	return out
}

// files lists the directory, temporary files included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, filepath.Join(dir, e.Name()))
	}
	return names
}
