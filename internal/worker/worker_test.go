package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

func grantAll(t *testing.T, w *Worker, merchants []string, amount int64) {
	t.Helper()
	ctx := context.Background()
	for _, m := range merchants {
		if _, err := w.path.Deductor.Grant(ctx, m, amount, "grant-"+m); err != nil {
			t.Fatal(err)
		}
	}
}

// N events with duplicates, malformed JSON, invalid fields and conflicting
// duplicates, through several partitions, while a second worker joins the group
// and the first one leaves: one ledger row per valid unique event, every bad
// message in the DLQ once by provenance (a rebalance may leave copies), Redis
// equal to MySQL, nothing overdrawn.
func TestWorkerEndToEndWithRebalance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := newRig(t, 4)
	traffic, err := scenario.BuildTraffic(workload.Config{
		Seed: 7, Merchants: 40, Skew: workload.Skew{Kind: workload.Hot, Param: 0.2},
		MinAmount: 1, MaxAmount: 9, Duplicates: 0.05, Malformed: 0.03, IDPrefix: "e2e-",
	}, 3000, 5)
	if err != nil {
		t.Fatal(err)
	}
	first := g.start(1, Options{})
	merchants := traffic.Merchants()
	grantAll(t, first.Worker, merchants[:len(merchants)-3], 400) // some merchants run dry: insufficient
	grantAll(t, first.Worker, merchants[len(merchants)-3:len(merchants)-1], 2)
	// The last merchant is never granted: unknown_merchant.

	g.produce(ctx, traffic.Messages[:1500])
	second := g.start(2, Options{NoHTTP: true})
	g.produce(ctx, traffic.Messages[1500:])
	time.Sleep(500 * time.Millisecond)
	first.stop(t) // leaves the group mid-stream: the second takes over its partitions
	g.drain(ctx)

	records := g.dlqRecords(ctx)
	rep := g.check(ctx, second.Worker, traffic.Produced, records)
	t.Logf("traffic: %d valid, %d duplicates, %d malformed, %d conflicts\n%s", traffic.Valid, traffic.Duplicates, traffic.Malformed, traffic.Conflicts, rep)
	if !rep.OK() {
		t.Fatal("invariants broken")
	}
	classes := map[dlq.Class]int{}
	seen := map[string]bool{}
	for _, r := range records {
		if !seen[r.Provenance()] {
			seen[r.Provenance()] = true
			classes[r.Class]++
		}
		if r.OriginalTopic != g.topic || r.Group != g.group || len(r.Value) == 0 {
			t.Errorf("record lost its provenance: %+v", r)
		}
	}
	if classes[dlq.ClassInvalid] != traffic.Malformed || classes[dlq.ClassConflict] != traffic.Conflicts {
		t.Fatalf("DLQ classes %v, want %d invalid and %d conflict", classes, traffic.Malformed, traffic.Conflicts)
	}
	var rejected, unknown int64
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE kind = 'rejected' AND reason <> 'unknown_merchant'").Scan(&rejected)
	g.db.DB.Raw("SELECT COUNT(*) FROM quota_ledger WHERE reason = 'unknown_merchant'").Scan(&unknown)
	if rejected == 0 || unknown == 0 {
		t.Errorf("the traffic should exercise insufficient (%d) and unknown merchant (%d) rejections", rejected, unknown)
	}
}

// The ops endpoints of a running worker: metrics carry the outcomes, readiness
// names each dependency, everything is read-only.
func TestWorkerOpsEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 2)
	w := g.start(3, Options{})
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 3, Merchants: 1, IDPrefix: "ops-"}, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	grantAll(t, w.Worker, traffic.Merchants(), 100)
	g.produce(ctx, traffic.Messages)
	g.drain(ctx)
	base := "http://" + w.HTTPAddr.String()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := get("/readyz")
		if code == 200 {
			for _, dep := range []string{"redis", "mysql", "kafka", "idgen_lease"} {
				if !strings.Contains(body, fmt.Sprintf("%q:\"ok\"", dep)) {
					t.Errorf("/readyz lacks %s: %s", dep, body)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %d: %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{`billing_events_total{outcome="applied"} 5`, "billing_batch_duration_seconds", "billing_lock_", "billing_event_lag_seconds"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	resp, err := http.Post(base+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d", resp.StatusCode)
	}
}
