package main

import (
	"bytes"
	"context"
	"errors"
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
		err := run(ctx, append([]string{"quota"}, args...), &out, &errOut)
		return out.String() + errOut.String(), err
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
	if err != nil || !strings.Contains(out, "mysql credited   250") || !strings.Contains(out, "expected remain  250") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = quota("show", "--merchant", "m-unknown", "--output", "json")
	if err != nil || !strings.Contains(out, `"Known": false`) {
		t.Fatalf("show json: %v\n%s", err, out)
	}
	if _, err := quota("grant", "--merchant", "bad id", "--amount", "0"); !errors.Is(err, errUsage) {
		t.Fatalf("bad flags: %v", err)
	}
}
