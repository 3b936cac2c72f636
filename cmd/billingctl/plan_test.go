package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/testenv"
)

// quotaCmd runs billingctl quota with args in the test's environment: its
// exit code and what it printed.
func quotaCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"quota"}, args...), &out, &errOut, os.Getenv)
	return code, out.String() + errOut.String()
}

// A merchant unknown to billing gets neither a plan nor shards (exit 3,
// nothing created); a plan is listed and cancelled, without Redis.
func TestQuotaPlanAndShardsOfMerchants(t *testing.T) {
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	t.Setenv("LOG_LEVEL", "error")
	count := func(q string) (n int64) {
		t.Helper()
		if err := db.DB.Raw(q).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, args := range [][]string{
		{"plan", "--merchant", "m-new", "--amount", "10", "--every", "1mo"},
		{"plan", "cancel", "--merchant", "m-new"},
		{"shards", "--merchant", "m-new", "--shards", "4"},
	} {
		if code, out := quotaCmd(t, args...); code != exitUnknown || !strings.Contains(out, "unknown to billing") {
			t.Errorf("quota %v of an unknown merchant: exit %d, want %d\n%s", args, code, exitUnknown, out)
		}
	}
	if n := count("SELECT (SELECT COUNT(*) FROM merchant_balance) + (SELECT COUNT(*) FROM merchant_plans) + (SELECT COUNT(*) FROM merchant_shards)"); n != 0 {
		t.Fatalf("%d rows created for an unknown merchant", n)
	}

	if code, out := quotaCmd(t, "grant", "--merchant", "m-1", "--amount", "5", "--id", "g-1"); code != 0 {
		t.Fatalf("grant: exit %d\n%s", code, out)
	}
	if code, out := quotaCmd(t, "grant", "--merchant", "m-2", "--amount", "5", "--id", "g-2"); code != 0 {
		t.Fatalf("grant: exit %d\n%s", code, out)
	}
	// Plans need MySQL only: Redis is gone from here on.
	t.Setenv("REDIS_ADDR", "127.0.0.1:1")
	for _, m := range []string{"m-1", "m-2"} {
		if code, out := quotaCmd(t, "plan", "--merchant", m, "--amount", "100", "--every", "1mo", "--anchor", "2099-01-01T00:00:00Z"); code != 0 {
			t.Fatalf("plan %s: exit %d\n%s", m, code, out)
		}
	}
	code, out := quotaCmd(t, "plan", "ls")
	if code != 0 || !strings.Contains(out, "m-1       100     1mo") || !strings.Contains(out, "2099-01-01T00:00:00Z  2099-01-01T00:00:00Z") || !strings.Contains(out, "m-2") {
		t.Fatalf("plan ls: exit %d\n%s", code, out)
	}
	if code, out := quotaCmd(t, "plan", "cancel", "--merchant", "m-1"); code != 0 || !strings.Contains(out, "m-1: plan cancelled") {
		t.Fatalf("plan cancel: exit %d\n%s", code, out)
	}
	if code, out := quotaCmd(t, "plan", "cancel", "--merchant", "m-1", "--output", "json"); code != 0 || !strings.Contains(out, `"cancelled": false`) {
		t.Fatalf("plan cancel again: exit %d\n%s", code, out)
	}
	code, out = quotaCmd(t, "plan", "ls", "--output", "json")
	var plans []planResult
	if code != 0 || json.Unmarshal([]byte(out), &plans) != nil || len(plans) != 1 || plans[0].MerchantID != "m-2" || plans[0].Every != "1mo" {
		t.Fatalf("plan ls after cancel: exit %d\n%s", code, out)
	}
	if code, out := quotaCmd(t, "plan", "ls", "--merchant", "m-2"); code != 2 {
		t.Fatalf("plan ls --merchant: exit %d, want 2\n%s", code, out)
	}
	if n := count("SELECT COUNT(*) FROM merchant_plans"); n != 1 {
		t.Fatalf("%d plans left, want 1", n)
	}

	// A read takes no worker ID and starts without Redis: the MySQL side is
	// printed, and the unreadable Redis fails the command after it.
	code, out = quotaCmd(t, "show", "--merchant", "m-2")
	if code != 1 || !strings.Contains(out, "mysql credited    5") || !strings.Contains(out, "redis remain      unreadable") {
		t.Fatalf("show without Redis: exit %d\n%s", code, out)
	}
}

// The help lists every command of the tables, so none can be left out.
func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &out, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	c := &ctl{}
	var want []string
	for _, cmd := range c.commands() {
		want = append(want, "  billingctl "+cmd.Name+" ")
	}
	for _, cmd := range c.quotaCommands() {
		want = append(want, "  billingctl quota "+cmd.Name+" ")
	}
	want = append(want, "  billingctl quota plan ls ", "  billingctl quota plan cancel ", "  billingctl dlq ls ", "  billingctl dlq replay ")
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("help lacks %q:\n%s", w, out.String())
		}
	}
}
