package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/migrate"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// waitReadyz polls /readyz until it answers code with a body containing want.
func waitReadyz(t *testing.T, w *Worker, code int, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + w.HTTPAddr.String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == code && strings.Contains(string(body), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %s, want %d with %q", resp.StatusCode, body, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// emptyDatabase gives the rig a database no migration touched.
func (g *rig) emptyDatabase() {
	g.db = testenv.NewEmptyMySQL(g.t)
	g.env["MYSQL_DSN"] = g.db.DSN
}

func (g *rig) migrator() *migrate.Migrator {
	g.t.Helper()
	m, err := migrate.Open(g.db.DSN)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { m.Close() })
	return m
}

// checkApplied asserts every valid event left one debit row, nothing was
// dead-lettered, and Redis agrees with MySQL.
func (g *rig) checkApplied(ctx context.Context, w *Worker, traffic scenario.Traffic) {
	g.t.Helper()
	records := g.dlqRecords(ctx)
	if len(records) != 0 {
		g.t.Fatalf("%d messages dead-lettered, first: %s %s", len(records), records[0].Class, records[0].Message)
	}
	var debits int64
	if err := g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE kind = 'debit'").Scan(&debits).Error; err != nil {
		g.t.Fatal(err)
	}
	if debits != int64(traffic.Valid) {
		g.t.Errorf("%d debit rows, want one for each of the %d events", debits, traffic.Valid)
	}
	if rep := g.check(ctx, w, traffic.Produced, records); !rep.OK() {
		g.t.Fatalf("invariants broken:\n%s", rep)
	}
}

// A worker started before `billingctl migrate` consumes nothing, says why on
// /readyz, and starts once the schema is this binary's: staged migrations
// (version 2 is still not enough), then the grants, then the last one; every
// event is then applied once, nothing dead-lettered.
func TestWorkerWaitsForTheSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	g.emptyDatabase()
	st, err := migrate.ReadStatus(ctx, g.db.SQL)
	if err != nil || st.Latest < 2 {
		t.Fatalf("status %+v %v: the test needs at least two migrations", st, err)
	}
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 21, Merchants: 8, MinAmount: 1, MaxAmount: 5, IDPrefix: "schema-"}, 300, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := g.start(6, Options{})
	g.produce(ctx, traffic.Messages)
	waitReadyz(t, w.Worker, http.StatusServiceUnavailable, fmt.Sprintf(`"schema":"schema at version 0, want %d: run billingctl migrate"`, st.Latest))

	// Version 7 is the last whose ledger rows have no seq: the grants below
	// are written as a binary of then wrote them.
	const beforeSeq = 7
	m := g.migrator()
	if err := m.Goto(beforeSeq); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, w.Worker, http.StatusServiceUnavailable, fmt.Sprintf("schema at version %d, want %d", beforeSeq, st.Latest))
	// The ledger's tables exist by now, the outbox of a grant's events not
	// yet (the write path refuses to grant): grant in SQL as version 2 did.
	for i, m := range traffic.Merchants() {
		if err := g.db.DB.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES (?, 10000)", m).Error; err != nil {
			t.Fatal(err)
		}
		if err := g.db.DB.Exec("INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, occurred_at) VALUES (?, ?, ?, 'credit', 10000, 10000, 'grant', NOW(6))",
			i+1, "grant-"+m, m).Error; err != nil {
			t.Fatal(err)
		}
	}
	// Still nothing consumed: no offset committed, no ledger row beyond the grants.
	if lag, err := scenario.GroupLag(ctx, g.client(), g.group, g.topic); err != nil || lag != int64(len(traffic.Messages)) {
		t.Fatalf("group lag %d (%v) while the schema is behind, want all %d messages", lag, err, len(traffic.Messages))
	}
	var rows int64
	if err := g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE kind <> 'credit'").Scan(&rows).Error; err != nil || rows != 0 {
		t.Fatalf("%d ledger rows (%v) while the schema is behind", rows, err)
	}

	if _, err := m.Up(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx)
	waitReadyz(t, w.Worker, http.StatusOK, `"schema":"ok"`)
	g.checkApplied(ctx, w.Worker, traffic)
}

// A schema newer than the binary (a newer release migrated it) is refused
// with a reason, not crashed on; a stop while waiting is clean and quick.
func TestWorkerRefusesANewerSchemaAndStopsCleanly(t *testing.T) {
	g := newRig(t, 1)
	st, err := g.migrator().Status()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.migrator().Force(int(st.Latest) + 1); err != nil {
		t.Fatal(err)
	}
	w := g.start(8, Options{})
	waitReadyz(t, w.Worker, http.StatusServiceUnavailable, fmt.Sprintf("schema at version %d is newer than this binary's %d", st.Latest+1, st.Latest))
	began := time.Now()
	w.stop(t)
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("stop while waiting for the schema took %v", took)
	}
}

// This release's worker rolled back onto the next release's schema: after an
// additive migration it consumes and commits every event; after a breaking
// one it consumes nothing and /readyz names the migration and why, until the
// newer build migrates down.
func TestWorkerRolledBackOntoTheNextSchema(t *testing.T) {
	for _, tt := range []struct{ name, mark, why string }{
		{"additive", "-- compat: additive\n", ""},
		{"breaking", "-- compat: breaking: renames a column this release writes\n", "renames a column this release writes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			g := newRig(t, 2)
			next, v := testenv.NextMigrations(t, tt.mark+"ALTER TABLE quota_ledger ADD COLUMN note VARCHAR(64) NULL;", "ALTER TABLE quota_ledger DROP COLUMN note;")
			newer, err := migrate.OpenFS(g.db.DSN, next)
			if err != nil {
				t.Fatal(err)
			}
			defer newer.Close()
			if _, err := newer.Up(); err != nil {
				t.Fatal(err)
			}
			traffic, err := scenario.BuildTraffic(workload.Config{Seed: 23, Merchants: 8, MinAmount: 1, MaxAmount: 5, IDPrefix: "rollback-"}, 300, 0)
			if err != nil {
				t.Fatal(err)
			}
			w := g.start(10, Options{})
			grantAll(t, w.Worker, traffic.Merchants(), 10_000)
			g.produce(ctx, traffic.Messages)
			if tt.why != "" {
				waitReadyz(t, w.Worker, http.StatusServiceUnavailable, fmt.Sprintf("schema at version %d is newer than this binary's %d and not compatible with it (migration %d: %s)", v, v-1, v, tt.why))
				if lag, err := scenario.GroupLag(ctx, g.client(), g.group, g.topic); err != nil || lag != int64(len(traffic.Messages)) {
					t.Fatalf("group lag %d (%v) on a breaking schema, want all %d messages", lag, err, len(traffic.Messages))
				}
				if err := newer.Down(1); err != nil {
					t.Fatal(err)
				}
			}
			g.drain(ctx)
			waitReadyz(t, w.Worker, http.StatusOK, `"schema":"ok"`)
			g.checkApplied(ctx, w.Worker, traffic)
		})
	}
}

// A table renamed away while the worker runs (a botched manual migration)
// fails every batch with MySQL error 1146 while MySQL answers pings: an
// outage, not the messages' fault. Nothing is dead-lettered however often
// the batches are retried, /readyz names the error, and once the table is
// back every event is applied once.
func TestWorkerSurvivesATableRenamedAway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 2)
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 22, Merchants: 8, MinAmount: 1, MaxAmount: 5, Duplicates: 0.05, IDPrefix: "rename-"}, 400, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.env["WORKER_LANES"] = "1" // one batch, retried: each retry tries every message in it
	reg := prometheus.NewRegistry()
	w := g.start(9, Options{Registry: reg})
	grantAll(t, w.Worker, traffic.Merchants(), 10_000)
	g.produce(ctx, traffic.Messages[:100])
	g.drain(ctx)

	if err := g.db.DB.Exec("RENAME TABLE quota_ledger TO quota_ledger_away").Error; err != nil {
		t.Fatal(err)
	}
	renamed := true
	t.Cleanup(func() {
		if renamed {
			g.db.DB.Exec("RENAME TABLE quota_ledger_away TO quota_ledger")
		}
	})
	g.produce(ctx, traffic.Messages[100:])
	waitReadyz(t, w.Worker, http.StatusServiceUnavailable, "Error 1146")
	// WORKER_MAX_ATTEMPTS is 3: wait for three times as many tries.
	deadline := time.Now().Add(30 * time.Second)
	for outageRetries(t, reg) < 9 {
		if time.Now().After(deadline) {
			t.Fatalf("only %v outage retries in 30s", outageRetries(t, reg))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if recs := g.dlqRecords(ctx); len(recs) != 0 {
		t.Fatalf("the missing table dead-lettered %d messages, first: %s %s", len(recs), recs[0].Class, recs[0].Message)
	}

	if err := g.db.DB.Exec("RENAME TABLE quota_ledger_away TO quota_ledger").Error; err != nil {
		t.Fatal(err)
	}
	renamed = false
	g.drain(ctx)
	g.checkApplied(ctx, w.Worker, traffic)
}

// outageRetries reads billing_retries_total{kind="outage"}.
func outageRetries(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64 // over the consumers' topics
	for _, f := range families {
		if f.GetName() != "billing_retries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "outage" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
