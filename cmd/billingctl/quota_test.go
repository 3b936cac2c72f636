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

func TestQuotaGrantAndShow(t *testing.T) {
	db := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	quota := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		if code := run(ctx, append([]string{"quota"}, args...), &out, &errOut, os.Getenv); code != 0 {
			return out.String() + errOut.String(), exitError(code)
		}
		return out.String() + errOut.String(), nil
	}
	if out, err := quota("grant", "--merchant", "m-7", "--amount", "250", "--id", "g-1"); err != nil || !strings.Contains(out, "applied") {
		t.Fatalf("grant: %v %s", err, out)
	}
	if out, err := quota("grant", "--merchant", "m-7", "--amount", "250", "--id", "g-1"); err != nil || !strings.Contains(out, "duplicate") {
		t.Fatalf("second grant: %v %s", err, out)
	}
	if _, err := quota("grant", "--merchant", "m-7", "--amount", "9", "--id", "g-1"); err == nil {
		t.Fatal("a grant id reused with another amount was accepted")
	}
	var credited int64
	db.DB.Raw("SELECT credited FROM merchant_balance WHERE merchant_id = 'm-7'").Scan(&credited)
	if credited != 250 {
		t.Fatalf("credited %d, want 250 (idempotent grant)", credited)
	}
	out, err := quota("show", "--merchant", "m-7")
	if err != nil || !strings.Contains(out, "mysql credited    250") || !strings.Contains(out, "expected remain   250") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = quota("show", "--merchant", "m-7", "--output", "json")
	var view map[string]any
	if err != nil || json.Unmarshal([]byte(out), &view) != nil || view["merchant_id"] != "m-7" || view["credited"] != 250.0 ||
		view["known"] != true || view["pending"] == nil {
		t.Fatalf("show json: %v\n%s", err, out)
	}
	for k := range view {
		if k != strings.ToLower(k) {
			t.Errorf("show json key %q is not snake_case", k)
		}
	}
	if out, err := quota("alerts", "--merchant", "m-7", "--low", "100", "--low", "20%"); err != nil || !strings.Contains(out, "low thresholds 100,20%") {
		t.Fatalf("alerts: %v %s", err, out)
	}
	if out, err := quota("show", "--merchant", "m-7"); err != nil || !strings.Contains(out, "low thresholds    100,20%     ([100 50] units now)") {
		t.Fatalf("show after alerts: %v\n%s", err, out)
	}
	var units, percent int64
	db.DB.Raw("SELECT low_units, low_percent FROM merchant_balance WHERE merchant_id = 'm-7'").Row().Scan(&units, &percent)
	if units != 100 || percent != 20 {
		t.Fatalf("stored thresholds %d, %d%%", units, percent)
	}
	if out, err := quota("alerts", "--merchant", "m-7", "--default", "--output", "json"); err != nil || !strings.Contains(out, `"default": true`) {
		t.Fatalf("alerts --default: %v %s", err, out)
	}
	if _, err := quota("alerts", "--merchant", "m-7", "--low", "5%", "--low", "6%"); err != exitError(2) {
		t.Fatalf("two percentages: %v, want exit 2", err)
	}
	if _, err := quota("alerts", "--merchant", "m-unknown", "--none"); err != exitError(exitUnknown) {
		t.Fatalf("alerts of an unknown merchant: %v, want exit %d", err, exitUnknown)
	}
	if out, err := quota("policy", "--merchant", "m-7", "--floor", "50"); err != nil || !strings.Contains(out, "overdraft policy floor 50") {
		t.Fatalf("policy: %v %s", err, out)
	}
	if out, err := quota("show", "--merchant", "m-7", "--output", "json"); err != nil || !strings.Contains(out, `"overdraft_policy": "floor"`) || !strings.Contains(out, `"overdraft_floor": 50`) {
		t.Fatalf("show after policy: %v\n%s", err, out)
	}
	if _, err := quota("policy", "--merchant", "m-7", "--floor", "5", "--overage"); err != exitError(2) {
		t.Fatalf("two policies: %v, want exit 2", err)
	}
	if _, err := quota("policy", "--merchant", "m-unknown", "--overage"); err != exitError(exitUnknown) {
		t.Fatalf("policy of an unknown merchant: %v, want exit %d", err, exitUnknown)
	}
	if out, err := quota("policy", "--merchant", "m-7", "--reject"); err != nil || !strings.Contains(out, "overdraft policy reject") {
		t.Fatalf("policy --reject: %v %s", err, out)
	}
	if out, err := quota("shards", "--merchant", "m-7", "--shards", "65"); err != exitError(2) {
		t.Fatalf("65 shards: %v %s", err, out)
	}
	if out, err := quota("shards", "--merchant", "m-7", "--shards", "4"); err != nil || !strings.Contains(out, "4 shard(s), folded from 1") {
		t.Fatalf("shards: %v %s", err, out)
	}
	out, err = quota("show", "--merchant", "m-7")
	if err != nil || !strings.Contains(out, "shards            4") || !strings.Contains(out, "quota:{m-7#3}") ||
		!strings.Contains(out, "redis remain      250") {
		t.Fatalf("show of 4 shards: %v\n%s", err, out)
	}
	out, err = quota("show", "--merchant", "m-unknown", "--output", "json")
	if err != exitError(exitUnknown) || !strings.Contains(out, `"known": false`) {
		t.Fatalf("show of an unknown merchant: %v\n%s", err, out)
	}
	out, err = quota("grant", "--merchant", "m-8", "--amount", "5", "--id", "g-8", "--output", "json")
	var grant grantResult
	if err != nil || json.Unmarshal([]byte(out), &grant) != nil || grant != (grantResult{GrantID: "g-8", MerchantID: "m-8", Amount: 5, Outcome: "applied"}) {
		t.Fatalf("grant json: %v\n%s", err, out)
	}
	if _, err := quota("grant", "--merchant", "bad id", "--amount", "0"); err != exitError(2) {
		t.Fatalf("bad flags: %v", err)
	}
	// The zero time is no expiry at all, not "never": refused before anything is granted.
	if out, err := quota("grant", "--merchant", "m-9", "--amount", "5", "--id", "g-9", "--expires-at", "0001-01-01T00:00:00Z"); err != exitError(2) || !strings.Contains(out, "--expires-at") {
		t.Fatalf("grant expiring at the zero time: %v %s", err, out)
	}
}

// quota revoke: the remainder leaves once; a second revoke says so; an
// unknown grant, or another merchant's, exits 3.
func TestQuotaRevoke(t *testing.T) {
	db := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	t.Setenv("LOG_LEVEL", "error")
	quota := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"quota"}, args...), &out, &errOut, os.Getenv)
		return out.String() + errOut.String(), code
	}
	for _, g := range []string{"g-1", "g-2"} {
		if out, code := quota("grant", "--merchant", "m-1", "--amount", "40", "--id", g); code != 0 {
			t.Fatalf("grant %s: %d %s", g, code, out)
		}
	}
	if out, code := quota("revoke", "--grant", "g-1"); code != 0 || !strings.Contains(out, "grant g-1: revoked (40 of m-1)") {
		t.Fatalf("revoke: %d %s", code, out)
	}
	out, code := quota("revoke", "--grant", "g-1", "--merchant", "m-1", "--output", "json")
	var res map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res["outcome"] != "already_revoked" || res["amount"] != 40.0 {
		t.Fatalf("second revoke: %d %s", code, out)
	}
	for _, args := range [][]string{{"--grant", "nope"}, {"--grant", "g-2", "--merchant", "m-2"}} {
		if out, code := quota(append([]string{"revoke"}, args...)...); code != exitUnknown {
			t.Errorf("revoke %v: exit %d, want %d: %s", args, code, exitUnknown, out)
		}
	}
	if out, code := quota("revoke", "--grant", "bad{id}"); code != 2 {
		t.Errorf("revoke of a malformed id: exit %d, want 2: %s", code, out)
	}
	var credited, debited int64
	db.DB.Raw("SELECT credited, debited FROM merchant_balance WHERE merchant_id = 'm-1'").Row().Scan(&credited, &debited)
	if credited != 80 || debited != 40 {
		t.Errorf("credited %d, debited %d; want 80, 40 (revoked once)", credited, debited)
	}
}
