package demo

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// --trace prints one lane batch's span tree: the consumer span with the
// write path's steps under it (this run dead-letters, so the batch picked
// has the dead-letter write).
func TestDemoPrintsOneTrace(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	_, err := Run(ctx, Options{MySQLDSN: db.DSN, RedisAddrs: []string{r.Addr}, Partitions: 2,
		Merchants: 20, Events: 400, Hot: 0.2, Malformed: 0.05, Conflicts: 2, Seed: 3, NoRestart: true, Trace: true, Out: &out})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	tree := regexp.MustCompile(`(?m)^trace [0-9a-f]{32} \(one lane batch\)\n  process \S+ .*\n(    \S+ .*\n)+`).FindString(out.String())
	for _, step := range []string{"    send ", "    deduct.lock ", "    ledger.existing_events ", "    deduct.lua ", "    ledger.commit ", "    deduct.settle "} {
		if !bytes.Contains([]byte(tree), []byte(step)) {
			t.Errorf("the printed tree lacks %q:\n%s", step, tree)
		}
	}
}
