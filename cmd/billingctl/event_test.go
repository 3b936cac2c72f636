package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/testenv"
)

// event show finds a grant's ledger row and balance event, a payment known
// only to the DLQ, and says exit 3 for an event nothing names.
func TestEventShow(t *testing.T) {
	dlqEnv(t)
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	if out, errs, err := runCmd(t, "quota", "grant", "--merchant", "m-9", "--amount", "40", "--id", "g-ev"); err != nil {
		t.Fatalf("grant: %v\n%s\n%s", err, out, errs)
	}
	out, errs, err := runCmd(t, "event", "show", "g-ev")
	if err != nil || !strings.Contains(out, "ledger: credit 40 of merchant m-9 (grant), balance after 40") ||
		!strings.Contains(out, "dead letters: 0 record(s)") || !strings.Contains(out, "quota.granted") {
		t.Errorf("event show g-ev: %v\n%s\n%s", err, out, errs)
	}
	out, errs, err = runCmd(t, "event", "show", "e-1", "--output", "json")
	var v adminapi.EventView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("event show e-1: %v\n%s\n%s", err, out, errs)
	}
	if len(v.Ledger) != 0 || len(v.DeadLetters) != 1 || v.DeadLetters[0].Class != "conflict" || v.DeadLetters[0].Merchant != "m-1" {
		t.Errorf("e-1: %+v", v)
	}
	if out, _, err := runCmd(t, "event", "show", "e-never"); !errors.Is(err, exitError(exitUnknown)) || !strings.Contains(out, "ledger: no row") {
		t.Errorf("unknown event: %v\n%s", err, out)
	}
	if _, _, err := runCmd(t, "event", "show", "bad{id"); !errors.Is(err, exitError(2)) {
		t.Errorf("malformed id: %v, want exit 2", err)
	}
}
