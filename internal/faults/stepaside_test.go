package faults

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// stepAsideAfter is IDGEN_STEP_ASIDE_AFTER of the step-aside scenario.
const stepAsideAfter = 2 * time.Second

// Two worker processes consume while, at seeded random moments, another
// holder takes one's worker-ID lease for 10s (as a pod that wrongly claims the
// ID would): its generator refuses, and after IDGEN_STEP_ASIDE_AFTER it
// leaves the group, answers /readyz 503 naming the reason and counts it in
// billing_idgen_stepped_aside; the other worker takes its partitions. When
// the key expires it re-acquires the lease and rejoins. Every event still
// ends with exactly one ledger row; the longest an event waited is logged
// against the bound.
func TestStepAsideWhenLeaseTaken(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	// 12s per fault (10s away, then the rejoin) at 250/s: 4500 messages
	// keep the load running past the CI size's one fault and its recovery.
	faults := size(1, 4)
	tr := traffic(t, p.seed(), mixedLoad("aside-"), size(4500, 16000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	override := map[string]string{"IDGEN_STEP_ASIDE_AFTER": stepAsideAfter.String()}
	procs := []*proc{g.startProc(1, override), g.startProc(2, override)}
	load := p.startLoad(ctx, tr.Messages, 250)

	for range faults {
		p.await(ctx, between(p.rng, time.Second, 2500*time.Millisecond))
		vi := p.rng.IntN(len(procs))
		victim := procs[vi]
		p.fired(ctx, "lease taken", victim.name, "for 10s")
		intruder := `{"pod":"intruder","ip":"","since":"2026-12-04T00:00:00Z","token":"not-yours"}`
		if err := g.rdb.Set(ctx, g.keys.WorkerLease(vi+1), intruder, 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		waitMetric(t, ctx, victim, "billing_idgen_stepped_aside", 1)
		if code, body := readyz(ctx, victim); code != http.StatusServiceUnavailable || !strings.Contains(body, "stepped aside") {
			t.Errorf("%s /readyz while aside: %d %s", victim.name, code, body)
		}
		waitMetric(t, ctx, victim, "billing_idgen_stepped_aside", 0)
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("lease taken", faults)
	g.drain(ctx, 90*time.Second)
	var asides float64
	for _, pr := range procs {
		asides += pr.Total(ctx)["billing_idgen_step_asides_total"]
	}
	if asides < float64(faults) {
		t.Errorf("%v step asides counted for %d lease takeovers", asides, faults)
	}
	g.logLongestWait(ctx)
	for _, pr := range procs {
		pr.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)
}

// waitMetric waits up to a minute for the gauge name of p to read want.
func waitMetric(t *testing.T, ctx context.Context, p *proc, name string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		m, err := p.Scrape(ctx)
		if err == nil {
			if got = m[name]; got == want {
				return
			}
		}
	}
	t.Fatalf("%s: %s stayed %v, want %v", p.name, name, got, want)
}

func readyz(ctx context.Context, p *proc) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr()+"/readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// logLongestWait logs how long events waited from their first produce (the
// record's timestamp) to their ledger row: the longest and the 99th
// percentile. A figure for the report, not an assertion.
func (g *rig) logLongestWait(ctx context.Context) {
	g.t.Helper()
	produced := map[string]time.Time{}
	g.eachMessage(ctx, g.topic, func(m kafka.Message) {
		var e struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(m.Value, &e) != nil || e.EventID == "" {
			return
		}
		if at, ok := produced[e.EventID]; !ok || m.Time.Before(at) {
			produced[e.EventID] = m.Time
		}
	})
	rows, err := g.db.SQL.QueryContext(ctx, "SELECT event_id, created_at FROM quota_ledger WHERE kind IN ('debit', 'rejected')")
	if err != nil {
		g.t.Fatal(err)
	}
	defer rows.Close()
	var waits []time.Duration
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			g.t.Fatal(err)
		}
		if p, ok := produced[id]; ok {
			waits = append(waits, at.Sub(p))
		}
	}
	if err := rows.Err(); err != nil {
		g.t.Fatal(err)
	}
	if len(waits) == 0 {
		return
	}
	slices.Sort(waits)
	g.t.Logf("event waits, produce to ledger row, over %d events: p99 %v, longest %v (IDGEN_STEP_ASIDE_AFTER %v)",
		len(waits), waits[len(waits)*99/100].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond), stepAsideAfter)
}
