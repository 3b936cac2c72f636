package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/doccmd"
	"github.com/quotaflow/billing/internal/testenv"
)

// Every billingctl command the README, the alert rules and the runbooks quote
// runs, in the order quoted, against a stage of real services (a migrated
// database, a Redis prefix, the in-process broker with a seeded DLQ) and
// exits 0.
func TestDocumentedCommandsRun(t *testing.T) {
	cmds, err := doccmd.Find("../..")
	if err != nil {
		t.Fatal(err)
	}
	found := doccmd.For(cmds, "billingctl")
	if len(found) == 0 {
		t.Fatal("no billingctl command in the documentation")
	}
	dlqEnv(t)
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	t.Setenv("DLQ_STATE_DIR", t.TempDir())
	for _, c := range found {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out, errOut bytes.Buffer
		code := run(ctx, c.Args, &out, &errOut, os.Getenv)
		cancel()
		if code != 0 {
			t.Errorf("%s: exit %d\nstdout: %s\nstderr: %s", c, code, out.String(), errOut.String())
		}
	}
}
