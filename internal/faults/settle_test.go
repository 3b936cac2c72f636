package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/scenario"
)

// reconcileGrace is the reconciler's grace for pending deductions (its
// minimum): settle waits it out after the workers stop, so nothing left
// pending is in-flight work.
const reconcileGrace = time.Second

// drain waits until the group has committed every message of the topic.
func (g *rig) drain(ctx context.Context, within time.Duration) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last int64
	err := scenario.WaitDrained(ctx, g.client(), g.group, g.topic, func(lag int64) { last = lag })
	if err != nil {
		g.t.Fatalf("not drained within %v (lag %d): %v", within, last, err)
	}
}

// settle is the end of every scenario, once the group has drained and the
// workers have stopped, so nothing is in flight. It checks the invariants
// twice and fails the test on any violation:
//
//  1. before any repair, Redis included: every merchant's hash equals MySQL
//     with nothing pending, or is missing (hydrated on demand), except the
//     merchants in drifted, whose Redis the scenario changed by hand. A
//     reconciler pass first would repair, and so hide, a worker that
//     deducted twice in Redis or left a p: field behind.
//  2. after one reconciler pass: everything, drifted merchants included.
//
// A Redis restarted empty needs no declaration: a missing hash is allowed
// and a present one must be right.
func (g *rig) settle(ctx context.Context, produced invariant.Produced, drifted ...string) (*invariant.Report, *reconcile.Report) {
	g.t.Helper()
	records := g.readDLQ(ctx)
	for _, line := range g.missingDeadLetters(ctx, records) {
		g.t.Error(line)
	}
	g.check(ctx, "before the reconciler", produced, records, drifted)
	time.Sleep(reconcileGrace) // deductions pending now are orphans, not in-flight work
	rec := g.reconcileOnce(ctx)
	g.t.Logf("reconciler pass: status %s, %d checked, %d drifted, %d repaired, %d busy, abs drift %d%s",
		rec.Status, rec.Checked, rec.Drifted, rec.Repaired, rec.Busy, rec.AbsDrift, findings(rec))
	if rec.Err() != nil {
		g.t.Fatalf("reconciler pass failed: %v", rec.Err())
	}
	return g.check(ctx, "after the reconciler", produced, records, nil), rec
}

// check runs the invariant checker with drifted exempt from the Redis
// comparison and fails the test on any violation.
func (g *rig) check(ctx context.Context, when string, produced invariant.Produced, records []dlq.Record, drifted []string) *invariant.Report {
	g.t.Helper()
	rep, err := invariant.Check(ctx, produced, invariant.State{
		DB: g.db.DB, Redis: g.rdb, Keys: g.keys, DLQ: records, RedisSettled: true, Drifted: drifted,
	})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Logf("invariants %s:\n%s", when, rep)
	if !rep.OK() {
		g.t.Fatalf("invariants broken %s (see the report above)", when)
	}
	return rep
}

func findings(r *reconcile.Report) string {
	if len(r.Findings) == 0 {
		return ""
	}
	kinds := map[reconcile.Kind]int{}
	for _, f := range r.Findings {
		kinds[f.Kind]++
	}
	var b strings.Builder
	b.WriteString(", findings:")
	for k, n := range kinds {
		b.WriteString(" " + string(k) + "=" + itoa(n))
	}
	return b.String()
}

// reconcileOnce runs one reconciler pass over every merchant.
func (g *rig) reconcileOnce(ctx context.Context) *reconcile.Report {
	g.t.Helper()
	r, err := reconcile.New(g.db.SQL, g.rdb, g.keys, reconcile.NewLocker(g.locks), reconcile.Config{
		Grace: reconcileGrace, BusyRetryDelay: 100 * time.Millisecond, LockTTL: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return r.Run(ctx)
}

// readDLQ reads the dead-letter topic back.
func (g *rig) readDLQ(ctx context.Context) []dlq.Record {
	g.t.Helper()
	c, err := dlq.NewClient(dlq.Broker{Addrs: g.kafka.Brokers, Transport: g.transport})
	if err != nil {
		g.t.Fatal(err)
	}
	recs, err := c.Records(ctx, g.dlqTopic)
	if err != nil {
		g.t.Fatal(err)
	}
	return recs
}

// missingDeadLetters describes every undecodable message of the consumed topic that no dead-letter record has
// the provenance of.
func (g *rig) missingDeadLetters(ctx context.Context, records []dlq.Record) []string {
	g.t.Helper()
	have := map[string]bool{}
	for _, r := range records {
		have[r.Provenance()] = true
	}
	var out []string
	g.eachMessage(ctx, g.topic, func(m kafka.Message) {
		p := fmt.Sprintf("%s/%d/%d", g.topic, m.Partition, m.Offset)
		if _, err := event.Decode(m.Key, m.Value); err != nil && !have[p] {
			out = append(out, "undecodable message "+p+" is not in the DLQ")
		}
	})
	slices.Sort(out)
	return out
}

// eachMessage calls fn for every message of topic up to its high watermarks
// as of the call (see readRange).
func (g *rig) eachMessage(ctx context.Context, topic string, fn func(kafka.Message)) {
	g.t.Helper()
	c := g.client()
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(meta.Topics) != 1 {
		g.t.Errorf("metadata of %s: %v", topic, err)
		return
	}
	for _, p := range meta.Topics[0].Partitions {
		offs, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(p.ID)}}})
		if err != nil || len(offs.Topics[topic]) != 1 {
			g.t.Errorf("offsets of %s/%d: %v", topic, p.ID, err)
			return
		}
		if err := g.readRange(ctx, topic, p.ID, 0, offs.Topics[topic][0].LastOffset, fn); err != nil {
			g.t.Error(err)
		}
	}
}
