package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/operator"
	"github.com/quotaflow/billing/internal/statement"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestExportFlags(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC)
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		args     []string
		from, to time.Time
		err      string
	}{
		{[]string{"--previous", "day"}, day(2026, 2, 28), day(2026, 3, 1), ""},
		{[]string{"--previous", "month"}, day(2026, 2, 1), day(2026, 3, 1), ""},
		{[]string{"--from", "2026-01-01", "--to", "2026-01-02T12:00:00+08:00"}, day(2026, 1, 1), day(2026, 1, 2).Add(4 * time.Hour), ""},
		{[]string{"--previous", "week"}, time.Time{}, time.Time{}, `--previous "week" is not day or month`},
		{[]string{"--previous", "day", "--from", "2026-01-01"}, time.Time{}, time.Time{}, "exclude each other"},
		{[]string{"--from", "2026-01-01"}, time.Time{}, time.Time{}, "--from and --to (or --previous) are required"},
		{[]string{"--from", "yesterday", "--to", "2026-01-01"}, time.Time{}, time.Time{}, `--from "yesterday" is neither`},
		{[]string{"--from", "2026-01-02", "--to", "2026-01-01"}, time.Time{}, time.Time{}, "ends (2026-01-01T00:00:00Z) before it starts"},
		{[]string{"--previous", "day", "--format", "xml"}, time.Time{}, time.Time{}, `format "xml" is not csv or jsonl`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		o, err := parseExportFlags(c.args, &stdout, &stderr, now)
		if c.err != "" {
			if err == nil || !strings.Contains(stderr.String(), c.err) {
				t.Errorf("%v: %v, stderr %q; want %q", c.args, err, stderr.String(), c.err)
			}
			continue
		}
		if err != nil || !o.Period.From.Equal(c.from) || !o.Period.To.Equal(c.to) {
			t.Errorf("%v: period %v..%v (%v, %s), want %v..%v", c.args, o.Period.From, o.Period.To, err, stderr.String(), c.from, c.to)
		}
	}
}

func TestExportCode(t *testing.T) {
	for err, code := range map[error]int{
		nil:                                  0,
		&ledger.TieOutError{MerchantID: "m"}: 1,
		fmt.Errorf("x: %w", statement.ErrPeriodOpen):   2,
		fmt.Errorf("x: %w", ledger.ErrUnknownMerchant): 2,
		errors.New("connection refused"):               3,
		fmt.Errorf("stopped: %w", lock.ErrLost):        5,
		fmt.Errorf("x: %w", statement.ErrBusy):         6,
	} {
		if got := exportCode(err); got != code {
			t.Errorf("%v: exit %d, want %d", err, got, code)
		}
	}
}

// The program against real services: a statement and its metrics file; a
// second export of the same job refused while the first holds its lock; a
// ledger that does not tie out.
func TestExportRuns(t *testing.T) {
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": r.Addr, "REDIS_KEY_PREFIX": r.Keys.Prefix(), "LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	op, err := operator.New(t.Context(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Deductor.Grant(t.Context(), "m-1", 100, "grant-m-1"); err != nil {
		t.Fatal(err)
	}
	op.Close()
	dir := t.TempDir()
	from, to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	time.Sleep(time.Second) // until the period is over
	exp := func(extra ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"export", "--from", from, "--to", to, "--settle", "0", "--out", dir}, extra...), &stdout, &stderr, getenv)
		return code, stderr.String()
	}
	if code, stderr := exp("--metrics-file", filepath.Join(dir, "statements.prom"), "--format", "csv"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	prom, err := os.ReadFile(filepath.Join(dir, "statements.prom"))
	if err != nil || !strings.Contains(string(prom), "billing_statement_rows 1\n") || !strings.Contains(string(prom), "billing_statement_merchants 1\n") {
		t.Fatalf("metrics file: %s %v", prom, err)
	}
	period := ledger.Period{}
	period.From, _ = time.Parse(time.RFC3339, from)
	period.To, _ = time.Parse(time.RFC3339Nano, to)
	key := r.Keys.ExportLock(statement.JobID(period, nil))
	if err := r.Client.Set(t.Context(), key, "another export", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if code, stderr := exp(); code != exitBusy || !strings.Contains(stderr, "another export of this period") {
		t.Fatalf("a second export: exit %d: %s", code, stderr)
	}
	r.Client.Del(t.Context(), key)
	if _, err := db.SQL.Exec("UPDATE merchant_balance SET credited = credited + 1 WHERE merchant_id = 'm-1'"); err != nil {
		t.Fatal(err)
	}
	if code, stderr := exp(); code != exitTieOut || !strings.Contains(stderr, "merchant m-1 does not tie out") {
		t.Fatalf("a balance that does not tie out: exit %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("the directory holds %v, want the first export and its metrics", entries)
	}
}
