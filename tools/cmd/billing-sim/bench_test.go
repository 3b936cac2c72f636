package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/testenv"
)

func TestBenchCommand(t *testing.T) {
	m := testenv.NewEmptyMySQL(t)
	r := testenv.NewRedis(t)
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	output := filepath.Join(t.TempDir(), "bench.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"bench", "--strategies", "rowlock,redis-per-event", "--events", "120", "--merchants", "15",
		"--callers", "3", "--mysql-dsn", cfg.FormatDSN(), "--redis", r.Addr, "--json-file", output}
	getenv := env(map[string]string{"LOG_LEVEL": "error", "REDIS_KEY_PREFIX": r.Keys.Prefix()})
	if code := run(ctx, args, &out, &errOut, getenv); code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"rowlock", "redis-per-event", "1.00x", "busiest merchant"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Strategy string `json:"strategy"`
			Events   int    `json:"events"`
			Check    struct {
				LedgerOK   bool `json:"ledger_ok"`
				BalancesOK bool `json:"balances_ok"`
			} `json:"check"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(rep.Results) != 2 || rep.Results[1].Strategy != "redis-per-event" || rep.Results[0].Events != 120 ||
		!rep.Results[0].Check.LedgerOK || !rep.Results[1].Check.BalancesOK {
		t.Fatalf("JSON report: %s", b)
	}
}
