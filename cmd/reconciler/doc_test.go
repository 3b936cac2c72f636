package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/doccmd"
	"github.com/quotaflow/billing/internal/operator"
	"github.com/quotaflow/billing/internal/testenv"
)

// Every reconciler command the documentation quotes runs against real
// services right after a routine grant, whose quota hash is missing until
// the next event: each exits 0, since a missing hash is not drift. A loop
// (--every) is stopped after two seconds, as SIGTERM would. An export runs
// in a directory of its own and ends in its trailer.
func TestDocumentedCommandsRun(t *testing.T) {
	cmds, err := doccmd.Find("../..")
	if err != nil {
		t.Fatal(err)
	}
	found := doccmd.For(cmds, "reconciler")
	if len(found) == 0 {
		t.Fatal("no reconciler command in the documentation")
	}
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": r.Addr, "REDIS_KEY_PREFIX": r.Keys.Prefix(), "LOG_LEVEL": "error",
		"HTTP_ADDR": "127.0.0.1:0"}
	getenv := func(k string) string { return env[k] }
	t.Chdir(t.TempDir()) // where exports write their files
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(m string) {
		op, err := operator.New(ctx, cfg, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		if _, err := op.Deductor.Grant(ctx, m, 100, "grant-"+m); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range found {
		grant(fmt.Sprintf("m-%d", i)) // a fresh missing hash for every run
		rctx, stop := ctx, func() {}
		if slices.Contains(c.Args, "--every") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--every=") }) {
			rctx, stop = context.WithTimeout(ctx, 2*time.Second) // a loop: SIGTERM after its first runs
		}
		var out, errOut bytes.Buffer
		code := run(rctx, c.Args, &out, &errOut, getenv)
		stop()
		got, want := out.String(), "reconcile run"
		if c.Args[0] == "export" {
			got, want = exported(t, c.Args, got), "trailer"
		}
		if code != 0 || !strings.Contains(got, want) {
			t.Errorf("%s: exit %d\nstdout: %s\nstderr: %s", c, code, out.String(), errOut.String())
		}
	}
}

// exported is what an export command wrote: stdout, or its --out file.
func exported(t *testing.T, args []string, stdout string) string {
	t.Helper()
	i := slices.Index(args, "--out")
	if i < 0 || args[i+1] == "-" {
		return stdout
	}
	data, err := os.ReadFile(args[i+1])
	if err != nil {
		t.Errorf("%v: %v", args, err)
	}
	return string(data)
}
