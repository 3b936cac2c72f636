package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
)

// replayTraffic is the hand-built traffic of the replay test: valid events of
// healthy merchants and of merchants whose quota key gets poisoned, one
// malformed message and conflicting duplicates of healthy events.
type replayTraffic struct {
	msgs      []kafka.Message
	valid     []event.PaymentSucceeded
	poisoned  map[string]event.PaymentSucceeded // event_id -> event of a poisoned merchant
	merchants []string
	conflicts int
}

func buildReplayTraffic(healthy, poisoned []string, n, conflicts int) replayTraffic {
	t := replayTraffic{poisoned: map[string]event.PaymentSucceeded{}, merchants: append(slices.Clone(healthy), poisoned...)}
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	for i := range n {
		m := t.merchants[i%len(t.merchants)]
		e := event.PaymentSucceeded{EventID: fmt.Sprintf("rp-%03d", i), PaymentID: fmt.Sprintf("pay-%03d", i),
			MerchantID: m, Amount: int64(1 + i%7), Source: event.SourcePC, OccurredAt: at.Add(time.Duration(i) * time.Second)}
		t.msgs = append(t.msgs, kafka.Message{Key: []byte(m), Value: e.Encode()})
		t.valid = append(t.valid, e)
		if slices.Contains(poisoned, m) {
			t.poisoned[e.EventID] = e
		}
	}
	t.msgs = append(t.msgs, kafka.Message{Key: []byte(healthy[0]), Value: []byte(`{"event_id":"rp-bad","amount":"x"}`)})
	for i := range conflicts { // the first len(healthy) events are of healthy merchants
		c := t.valid[i]
		c.Amount++
		t.msgs = append(t.msgs, kafka.Message{Key: []byte(c.MerchantID), Value: c.Encode()})
		t.conflicts++
	}
	return t
}

// ledgerState is what a replay may or may not change in MySQL.
type ledgerState struct {
	events   map[string]ledgerRow // non-credit rows by event_id
	balances map[string][2]int64  // merchant -> credited, debited
}

type ledgerRow struct {
	MerchantID string
	Kind       string
	Amount     int64
}

func (g *rig) ledgerState(ctx context.Context) ledgerState {
	g.t.Helper()
	var rows []struct {
		EventID, MerchantID, Kind string
		Amount                    int64
	}
	if err := g.db.DB.WithContext(ctx).Raw("SELECT event_id, merchant_id, kind, amount FROM quota_ledger WHERE kind <> 'credit'").Scan(&rows).Error; err != nil {
		g.t.Fatal(err)
	}
	var bals []struct {
		MerchantID        string
		Credited, Debited int64
	}
	if err := g.db.DB.WithContext(ctx).Raw("SELECT merchant_id, credited, debited FROM merchant_balance").Scan(&bals).Error; err != nil {
		g.t.Fatal(err)
	}
	s := ledgerState{events: map[string]ledgerRow{}, balances: map[string][2]int64{}}
	for _, r := range rows {
		s.events[r.EventID] = ledgerRow{r.MerchantID, r.Kind, r.Amount}
	}
	for _, b := range bals {
		s.balances[b.MerchantID] = [2]int64{b.Credited, b.Debited}
	}
	return s
}

// sameLedger fails the test if the ledger or a balance moved.
func sameLedger(t *testing.T, what string, before, after ledgerState) {
	t.Helper()
	if len(after.events) != len(before.events) {
		t.Errorf("%s: ledger went from %d to %d event rows", what, len(before.events), len(after.events))
	}
	for m, b := range before.balances {
		if after.balances[m] != b {
			t.Errorf("%s: merchant %s balance moved from %v to %v", what, m, b, after.balances[m])
		}
	}
}

func (g *rig) dlqClient() *dlq.Client {
	g.t.Helper()
	c, err := dlq.NewClient(dlq.Broker{Addrs: g.kafka.Brokers, Transport: g.transport})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// highWatermarks is the high watermark of each partition of topic.
func (g *rig) highWatermarks(ctx context.Context, topic string) map[int]int64 {
	g.t.Helper()
	meta, err := g.client().Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(meta.Topics) != 1 {
		g.t.Fatalf("metadata of %s: %v", topic, err)
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, p := range meta.Topics[0].Partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p.ID))
	}
	resp, err := g.client().ListOffsets(ctx, req)
	if err != nil {
		g.t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.LastOffset
	}
	return out
}

func (g *rig) replay(ctx context.Context, o dlq.ReplayOptions, obs dlq.Observer) dlq.Report {
	g.t.Helper()
	o.DLQTopic = g.dlqTopic
	rep, err := g.dlqClient().Replay(ctx, o, obs)
	if err != nil {
		g.t.Fatalf("replay %s: %v (report %+v)", o.Selection(), err, rep)
	}
	return rep
}

// newRecords returns the DLQ records beyond the first n, failing unless there are want of them.
func newRecords(t *testing.T, recs []dlq.Record, n, want int) []dlq.Record {
	t.Helper()
	if len(recs) != n+want {
		t.Fatalf("DLQ holds %d records, want %d + %d", len(recs), n, want)
	}
	return recs[n:]
}

// eventCount is the worker's billing_events_total for outcome.
func eventCount(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "billing_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// stepRecorder keeps the steps of a replay.
type stepRecorder struct{ steps []dlq.Step }

func (r *stepRecorder) Begin(int64)     {}
func (r *stepRecorder) Acked(int)       {}
func (r *stepRecorder) Step(s dlq.Step) { r.steps = append(r.steps, s) }

// Issue 8, points 3 and 4, through the broker with the real worker, MariaDB
// and Redis: a merchant's quota key is made the wrong type, so its events fail
// alone until they are dead-lettered as exhausted; a dry run sends nothing;
// once the key is deleted (it is hydrated from MySQL), replaying the exhausted
// records adds exactly those events to the ledger; replaying them again adds
// nothing; a replayed conflict fails again and returns to the DLQ with its
// replay count raised, once per replay, until the limit refuses it.
func TestReplayEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 3)
	reg := prometheus.NewRegistry()
	w := g.start(5, Options{NoHTTP: true, Registry: reg})
	// Keys hash to partitions 0, 1, 2, 0 (healthy) and 0, 2 (poisoned): the
	// poisoned events and the conflicts each come from more than one partition.
	poisoned := []string{"rp-x", "rp-y"}
	tr := buildReplayTraffic([]string{"rp-a", "rp-e", "rp-c", "rp-b"}, poisoned, 36, 2)
	grantAll(t, w.Worker, tr.merchants, 1000)
	// A string where the quota hash belongs: WRONGTYPE in every script on the
	// key, a transient error of these messages alone (Redis is up).
	for _, m := range poisoned {
		if err := w.svc.Redis.Set(ctx, w.svc.Keys.Quota(m), "garbage", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	g.produce(ctx, tr.msgs)
	g.drain(ctx)
	recs := g.dlqRecords(ctx)
	classes := map[dlq.Class]int{}
	exhaustedFrom := map[int]int64{} // original partition -> exhausted records
	conflictFrom := map[string]int{} // event_id -> original partition of its conflict
	for _, r := range recs {
		classes[r.Class]++
		if e, err := event.Decode(r.Key, r.Value); err == nil && r.Class == dlq.ClassConflict {
			conflictFrom[e.EventID] = r.OriginalPartition
		}
		if r.OriginalTopic != g.topic || r.Group != g.group || r.ReplayCount != 0 {
			t.Errorf("record lost its provenance: %+v", r)
		}
		if r.Class != dlq.ClassExhausted {
			continue
		}
		e, err := event.Decode(r.Key, r.Value)
		if p := tr.poisoned[e.EventID]; err != nil || p.MerchantID != e.MerchantID || p.Amount != e.Amount {
			t.Errorf("exhausted record %s (%v) is not an event of %v", r.Value, err, poisoned)
		}
		exhaustedFrom[r.OriginalPartition]++
		if r.Attempts != 3 {
			t.Errorf("exhausted record %s after %d attempts, want WORKER_MAX_ATTEMPTS=3", e.EventID, r.Attempts)
		}
	}
	want := map[dlq.Class]int{dlq.ClassExhausted: len(tr.poisoned), dlq.ClassInvalid: 1, dlq.ClassConflict: tr.conflicts}
	if fmt.Sprint(classes) != fmt.Sprint(want) {
		t.Fatalf("DLQ classes %v, want %v", classes, want)
	}
	if len(exhaustedFrom) < 2 || len(slices.Compact(slices.Sorted(maps.Values(conflictFrom)))) < 2 {
		t.Fatalf("exhausted records come from partitions %v, conflicts from %v: the test wants more than one each", exhaustedFrom, conflictFrom)
	}
	poisonedState := g.ledgerState(ctx)
	for id, row := range poisonedState.events {
		if slices.Contains(poisoned, row.MerchantID) {
			t.Errorf("event %s of the poisoned merchant is in the ledger: %+v", id, row)
		}
	}
	if len(poisonedState.events) != len(tr.valid)-len(tr.poisoned) {
		t.Fatalf("ledger holds %d events, want the %d healthy ones", len(poisonedState.events), len(tr.valid)-len(tr.poisoned))
	}
	exhausted := dlq.Filter{Classes: []dlq.Class{dlq.ClassExhausted}}
	progress := filepath.Join(t.TempDir(), "exhausted.jsonl")

	t.Run("dry run sends nothing", func(t *testing.T) {
		topicHW, dlqHW := g.highWatermarks(ctx, g.topic), g.highWatermarks(ctx, g.dlqTopic)
		var obs stepRecorder
		rep := g.replay(ctx, dlq.ReplayOptions{Filter: exhausted, DryRun: true, ProgressFile: progress}, &obs)
		if !rep.DryRun || rep.Sent != len(tr.poisoned) || rep.Matched != len(tr.poisoned) || rep.Examined != len(recs) || !rep.Done {
			t.Errorf("dry run report %+v", rep)
		}
		for _, s := range obs.steps {
			if s.Action == dlq.ActionSend && (s.Message.Topic != g.topic || s.Message.Partition != s.Entry.OriginalPartition) {
				t.Errorf("dry run would send %s to %s/%d, want its origin %s/%d", s.Entry.EventID, s.Message.Topic, s.Message.Partition, g.topic, s.Entry.OriginalPartition)
			}
		}
		if got := g.highWatermarks(ctx, g.topic); fmt.Sprint(got) != fmt.Sprint(topicHW) {
			t.Errorf("dry run moved the topic's high watermarks from %v to %v", topicHW, got)
		}
		if got := g.highWatermarks(ctx, g.dlqTopic); fmt.Sprint(got) != fmt.Sprint(dlqHW) {
			t.Errorf("dry run moved the DLQ's high watermarks from %v to %v", dlqHW, got)
		}
		if _, err := os.Stat(progress); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("dry run wrote the progress file (stat: %v)", err)
		}
	})

	// The fix: without the key the next deduction hydrates it from MySQL.
	for _, m := range poisoned {
		if err := w.svc.Redis.Del(ctx, w.svc.Keys.Quota(m)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("replay after the fix adds exactly the fixed events", func(t *testing.T) {
		hw := g.highWatermarks(ctx, g.topic)
		rep := g.replay(ctx, dlq.ReplayOptions{Filter: exhausted, ProgressFile: progress}, nil)
		if rep.Sent != len(tr.poisoned) || !rep.Done || rep.Resumed {
			t.Fatalf("replay report %+v", rep)
		}
		for p, n := range g.highWatermarks(ctx, g.topic) { // each record went back to its own partition
			if n-hw[p] != exhaustedFrom[p] {
				t.Errorf("partition %d grew by %d, want the %d exhausted records that came from it", p, n-hw[p], exhaustedFrom[p])
			}
		}
		g.drain(ctx)
		after := g.ledgerState(ctx)
		sums := map[string]int64{}
		for id, e := range tr.poisoned {
			if row := after.events[id]; row != (ledgerRow{e.MerchantID, "debit", e.Amount}) {
				t.Errorf("replayed event %s recorded as %+v, want a debit of %d for %s", id, row, e.Amount, e.MerchantID)
			}
			sums[e.MerchantID] += e.Amount
		}
		if n := len(after.events) - len(poisonedState.events); n != len(tr.poisoned) {
			t.Errorf("the replay added %d ledger rows, want %d", n, len(tr.poisoned))
		}
		for m, b := range poisonedState.balances {
			b[1] += sums[m]
			if after.balances[m] != b {
				t.Errorf("merchant %s balance %v, want %v", m, after.balances[m], b)
			}
		}
		if got := g.dlqRecords(ctx); len(got) != len(recs) {
			t.Errorf("the replay dead-lettered %d more records", len(got)-len(recs))
		}
	})

	t.Run("replaying the same records again adds nothing", func(t *testing.T) {
		before, dups := g.ledgerState(ctx), eventCount(t, reg, "duplicate")
		rep := g.replay(ctx, dlq.ReplayOptions{Filter: exhausted, ProgressFile: progress}, nil)
		if rep.Sent != 0 || !rep.Resumed || !rep.Done {
			t.Errorf("resumed replay of a finished selection: %+v", rep)
		}
		rep = g.replay(ctx, dlq.ReplayOptions{Filter: exhausted, ProgressFile: progress, Restart: true}, nil)
		if rep.Sent != len(tr.poisoned) || rep.Resumed {
			t.Fatalf("restarted replay report %+v", rep)
		}
		g.drain(ctx)
		if got := eventCount(t, reg, "duplicate") - dups; got != float64(len(tr.poisoned)) {
			t.Errorf("the worker saw %g duplicates in the second replay, want %d", got, len(tr.poisoned))
		}
		sameLedger(t, "second replay", before, g.ledgerState(ctx))
		if got := g.dlqRecords(ctx); len(got) != len(recs) {
			t.Errorf("the second replay dead-lettered %d records", len(got)-len(recs))
		}
	})

	conflicts := dlq.Filter{Classes: []dlq.Class{dlq.ClassConflict}}
	conflictProgress := filepath.Join(t.TempDir(), "conflicts.jsonl")
	refailed := 0 // records a replay sent back to the DLQ
	t.Run("a replayed record that fails again returns with its count raised", func(t *testing.T) {
		before := g.ledgerState(ctx)
		var jobID string
		for count := 1; count <= 2; count++ {
			n := len(recs) + refailed
			if count > 1 {
				// Resumed, the job sends nothing twice: a re-dead-lettered copy is its original's.
				if rep := g.replay(ctx, dlq.ReplayOptions{Filter: conflicts, ProgressFile: conflictProgress}, nil); rep.Sent != 0 || !rep.Resumed || rep.Copies != tr.conflicts {
					t.Fatalf("conflict replay %d resumed: %+v, want nothing sent", count, rep)
				}
			}
			// A new job for the selection sends each message again, counted from its latest copy.
			rep := g.replay(ctx, dlq.ReplayOptions{Filter: conflicts, ProgressFile: conflictProgress, Restart: count > 1}, nil)
			if rep.Sent != tr.conflicts || rep.Resumed || rep.JobID == jobID {
				t.Fatalf("conflict replay %d report %+v", count, rep)
			}
			jobID = rep.JobID
			g.drain(ctx)
			for _, r := range newRecords(t, g.dlqRecords(ctx), n, tr.conflicts) {
				e, _ := event.Decode(r.Key, r.Value)
				p, known := conflictFrom[e.EventID]
				if r.Class != dlq.ClassConflict || r.ReplayCount != count || r.ReplayJob != jobID || r.OriginalTopic != g.topic ||
					!known || r.OriginalPartition != p {
					t.Errorf("replay %d: record %s %s from %d count %d job %q, want conflict from %d count %d job %s",
						count, r.Value, r.Class, r.OriginalPartition, r.ReplayCount, r.ReplayJob, p, count, jobID)
				}
			}
			refailed += tr.conflicts
		}
		hw := g.highWatermarks(ctx, g.topic)
		rep := g.replay(ctx, dlq.ReplayOptions{Filter: conflicts, ProgressFile: conflictProgress, MaxReplays: 2, Restart: true}, nil)
		if rep.Sent != 0 || len(rep.Refused) != tr.conflicts {
			t.Errorf("replay at the limit: %+v", rep)
		}
		for _, r := range rep.Refused {
			if r.ReplayCount != 2 {
				t.Errorf("refused %+v, want replay count 2", r)
			}
		}
		if got := g.highWatermarks(ctx, g.topic); fmt.Sprint(got) != fmt.Sprint(hw) {
			t.Errorf("a replay that refused everything moved the topic from %v to %v", hw, got)
		}
		sameLedger(t, "conflict replays", before, g.ledgerState(ctx))
	})

	// Every event once, balances equal to the ledger and to Redis, and every
	// dead-lettered position once: the first pass's records (exhausted ones
	// included: they stay in the DLQ) plus each re-failed replay at its new offset.
	final := g.dlqRecords(ctx)
	rep := g.check(ctx, w.Worker, invariant.Produced{Valid: tr.valid, Invalid: len(recs) + refailed, Exhausting: true}, final)
	t.Logf("\n%s", rep)
	if !rep.OK() {
		t.Fatal("invariants broken after the replays")
	}
}
