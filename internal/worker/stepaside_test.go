package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// heldClock is the real clock, except that while held it reads one fixed
// instant: a clock stepped back and kept there.
type heldClock struct {
	mu   sync.Mutex
	held time.Time
}

func (c *heldClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held.IsZero() {
		return c.held
	}
	return time.Now()
}

func (c *heldClock) Sleep(d time.Duration) { idgen.SystemClock().Sleep(d) }

func (c *heldClock) hold(t time.Time) {
	c.mu.Lock()
	c.held = t
	c.mu.Unlock()
}

// Two workers; the generator of one refuses for 10s: its clock reads 50ms
// behind its newest ID, or another holder writes its lease key. After
// IDGEN_STEP_ASIDE_AFTER it leaves the groups: the other records every
// event produced meanwhile (each row carries the worker ID of its Snowflake
// id), /readyz says why, and once the generator issues again it rejoins and
// takes traffic. Every event is in the ledger once.
func TestStepAsideHandsPartitionsOver(t *testing.T) {
	intruder := `{"pod":"intruder","ip":"","since":"2026-12-04T00:00:00Z","token":"not-yours"}`
	for _, tt := range []struct {
		name   string
		reason string // in /readyz while aside
		// refuse makes the victim's generator refuse for 10s.
		refuse func(t *testing.T, ctx context.Context, victim *runningWorker, clock *heldClock)
	}{
		{"clock 50ms back for 10s", "clock moved backward", func(t *testing.T, ctx context.Context, victim *runningWorker, clock *heldClock) {
			id, err := victim.path.IDs.NextID()
			if err != nil {
				t.Fatal(err)
			}
			issued := time.UnixMilli(idgen.EpochUnixMilli + int64(id)>>(idgen.SequenceBits+idgen.WorkerBits))
			clock.hold(issued.Add(-50 * time.Millisecond))
			back := time.AfterFunc(10*time.Second, func() { clock.hold(time.Time{}) })
			t.Cleanup(func() { back.Stop() })
		}},
		{"lease taken for 10s", "lease", func(t *testing.T, ctx context.Context, victim *runningWorker, _ *heldClock) {
			if err := victim.svc.Redis.Set(ctx, victim.svc.Keys.WorkerLease(1), intruder, 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) { stepAsideScenario(t, tt.reason, tt.refuse) })
	}
}

func stepAsideScenario(t *testing.T, reason string, refuse func(*testing.T, context.Context, *runningWorker, *heldClock)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := newRig(t, 4)
	const after = 2 * time.Second
	g.env["IDGEN_LEASE_TTL"], g.env["IDGEN_STEP_ASIDE_AFTER"] = "1s", after.String()
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 37, Merchants: 30, MinAmount: 1, MaxAmount: 3, IDPrefix: "sa-"}, 3000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Valid != len(traffic.Messages) {
		t.Fatalf("traffic has %d valid of %d messages; the parts below index it as all valid", traffic.Valid, len(traffic.Messages))
	}
	clock := &heldClock{}
	victim := g.start(1, Options{Clock: clock})
	other := g.start(2, Options{NoHTTP: true})
	grantAll(t, other.Worker, traffic.Merchants(), 1_000_000)
	part := func(i int) []kafka.Message { return traffic.Messages[i*1000 : (i+1)*1000] }
	eventIDs := func(i int) []string {
		var ids []string
		for _, e := range traffic.Produced.Valid[i*1000 : (i+1)*1000] {
			ids = append(ids, e.EventID)
		}
		return ids
	}

	g.waitMembers(t, ctx, g.group, g.topic, 2)
	g.waitMembers(t, ctx, g.group+".grants", g.grants, 2)
	g.produce(ctx, part(0))
	g.drain(ctx)
	if byWorker := g.rowsByWorker(t, eventIDs(0)); byWorker[1] == 0 || byWorker[2] == 0 {
		t.Fatalf("before the fault both workers should write: rows by worker %v", byWorker)
	}

	refuse(t, ctx, victim, clock)
	waitUntil(t, time.Minute, "the victim's generator refusing", func() bool { return victim.path.IDs.Check() != nil })
	produced := time.Now()
	g.produce(ctx, part(1))
	waitUntil(t, time.Minute, "the victim stepped aside", func() bool { return victim.aside.Ready(ctx) != nil })
	code, body := httpGet(t, "http://"+victim.HTTPAddr.String()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stepped aside") || !strings.Contains(body, reason) {
		t.Errorf("/readyz while aside: %d %s", code, body)
	}
	_, metrics := httpGet(t, "http://"+victim.HTTPAddr.String()+"/metrics")
	for _, want := range []string{"billing_idgen_stepped_aside 1", "billing_quota_relay_leader 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics while aside lacks %q", want)
		}
	}
	// The grants consumer steps aside too: the other worker holds every grants partition.
	g.waitMembers(t, ctx, g.group+".grants", g.grants, 1)
	g.drain(ctx)
	var last time.Time
	if err := g.db.DB.Raw("SELECT MAX(created_at) FROM quota_ledger WHERE event_id IN ?", eventIDs(1)).Row().Scan(&last); err != nil {
		t.Fatal(err)
	}
	if byWorker := g.rowsByWorker(t, eventIDs(1)); byWorker[2] != 1000 {
		t.Fatalf("while the victim's generator refused, rows by worker %v; want all 1000 by worker 2", byWorker)
	}
	// A figure, not an assertion: the longest an event waited.
	t.Logf("events produced while the generator refused: all recorded by the other worker, the last %v after the produce began (bound %v)",
		last.Sub(produced).Round(time.Millisecond), after)

	waitUntil(t, time.Minute, "the victim back", func() bool { return victim.aside.Ready(ctx) == nil })
	g.waitMembers(t, ctx, g.group, g.topic, 2)
	g.waitMembers(t, ctx, g.group+".grants", g.grants, 2)
	g.produce(ctx, part(2))
	g.drain(ctx)
	if byWorker := g.rowsByWorker(t, eventIDs(2)); byWorker[1] == 0 {
		t.Fatalf("after the rejoin the victim took no traffic: rows by worker %v", byWorker)
	}
	rep := g.check(ctx, other.Worker, traffic.Produced, g.dlqRecords(ctx))
	if !rep.OK() {
		t.Fatalf("invariants broken:\n%s", rep)
	}
}

// rowsByWorker counts the ledger rows of eventIDs by the worker ID in their Snowflake id.
func (g *rig) rowsByWorker(t *testing.T, eventIDs []string) map[int]int {
	t.Helper()
	rows, err := g.db.DB.Raw("SELECT (id >> 12) & 1023, COUNT(*) FROM quota_ledger WHERE event_id IN ? GROUP BY 1", eventIDs).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var w, n int
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		out[w] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitMembers waits until group is stable with n members, each assigned partitions of topic.
func (g *rig) waitMembers(t *testing.T, ctx context.Context, group, topic string, n int) {
	t.Helper()
	waitUntil(t, time.Minute, fmt.Sprintf("%d members of %s with partitions", n, group), func() bool {
		resp, err := g.client().DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].GroupState != "Stable" {
			return false
		}
		with := 0
		for _, m := range resp.Groups[0].Members {
			for _, tp := range m.MemberAssignments.Topics {
				if tp.Topic == topic && len(tp.Partitions) > 0 {
					with++
				}
			}
		}
		return with == n
	})
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
