package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/doccmd"
	"github.com/quotaflow/billing/internal/migrate"
	"github.com/quotaflow/billing/internal/testenv"
)

// The rollback runbook's commands run in order on a migrated database and do
// what it says: --status prints what the runbook shows, --down 1 reverts the
// newest migration, migrate applies it again.
func TestRollbackRunbook(t *testing.T) {
	b, err := os.ReadFile("../../docs/rollback.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	cmds := doccmd.For(doccmd.Parse("docs/rollback.md", string(b)), "billingctl")
	db := testenv.NewMySQL(t)
	ctx := context.Background()
	st, err := migrate.ReadStatus(ctx, db.SQL)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MYSQL_DSN": db.DSN, "LOG_LEVEL": "error"}
	version, seen := st.Latest, map[string]bool{}
	for _, c := range cmds {
		var out, errOut bytes.Buffer
		if code := run(ctx, c.Args, &out, &errOut, func(k string) string { return env[k] }); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c, code, out.String(), errOut.String())
		}
		args := strings.Join(c.Args, " ")
		seen[args] = true
		switch args {
		case "migrate --down 1":
			version--
		case "migrate":
			version = st.Latest
		}
		if got, err := migrate.ReadStatus(ctx, db.SQL); err != nil || got.Version != version || got.Dirty {
			t.Fatalf("%s: schema %+v %v, want version %d", c, got, err, version)
		}
		// A status quoted with its output in a comment prints just that.
		n, _ := strconv.Atoi(c.Source[strings.LastIndex(c.Source, ":")+1:])
		if _, shown, ok := strings.Cut(lines[n-1], " # "); ok && args == "migrate --status" && !strings.Contains(out.String(), strings.TrimSpace(shown)) {
			t.Errorf("%s printed\n%s\nthe runbook shows %q", c, out.String(), strings.TrimSpace(shown))
		}
	}
	for _, want := range []string{"migrate --status", "migrate --down 1", "migrate"} {
		if !seen[want] {
			t.Errorf("the runbook quotes no `billingctl %s` (quoted: %v)", want, cmds)
		}
	}
}
