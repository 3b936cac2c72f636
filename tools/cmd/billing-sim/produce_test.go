package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

func TestProduceWritesTheWorkload(t *testing.T) {
	k := testenv.NewKafka(t)
	topic := k.Topic(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"produce", "--topic", topic, "--total", "700", "--merchants", "25", "--hot", "0.2",
		"--duplicates", "0.02", "--malformed", "0.01", "--seed", "3", "--id-prefix", "t-"}
	getenv := env(map[string]string{"LOG_LEVEL": "error", "KAFKA_BROKERS": strings.Join(k.Brokers, ",")})
	if code := run(ctx, args, &out, &errOut, getenv); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "done: 700 messages") {
		t.Fatalf("output lacks the final count:\n%s", out.String())
	}

	want, err := workload.Generate(workload.Config{Seed: 3, Merchants: 25, Skew: workload.Skew{Kind: workload.Hot, Param: 0.2},
		Duplicates: 0.02, Malformed: 0.01, IDPrefix: "t-"}, 700)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]int{}
	for _, m := range want {
		wantKeys[string(m.Key)]++
	}
	gotKeys := map[string]int{}
	for _, m := range k.ReadAll(ctx, t, topic, 3) {
		gotKeys[string(m.Key)]++
	}
	if len(gotKeys) != len(wantKeys) {
		t.Fatalf("%d distinct keys read back, %d generated", len(gotKeys), len(wantKeys))
	}
	for key, n := range wantKeys {
		if gotKeys[key] != n {
			t.Errorf("key %s: %d read back, %d generated", key, gotKeys[key], n)
		}
	}
}

// With --refunds the refunds go to their own topic, keyed by merchant, and
// the payments to theirs: together the stream the generator makes.
func TestProduceWritesRefundsToTheirTopic(t *testing.T) {
	k := testenv.NewKafka(t)
	topic, refunds := k.Topic(t, 2), k.Topic(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"produce", "--topic", topic, "--refunds-topic", refunds, "--total", "600", "--merchants", "5",
		"--refunds", "0.2", "--seed", "4", "--id-prefix", "r-"}
	getenv := env(map[string]string{"LOG_LEVEL": "error", "KAFKA_BROKERS": strings.Join(k.Brokers, ",")})
	if code := run(ctx, args, &out, &errOut, getenv); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut.String())
	}
	want, err := workload.Generate(workload.Config{Seed: 4, Merchants: 5, Refunds: 0.2, IDPrefix: "r-"}, 600)
	if err != nil {
		t.Fatal(err)
	}
	// Times are the run's (occurred_at is when produced): ids and keys are the seed's.
	wantBy := map[workload.Topic]map[string]int{workload.Payments: {}, workload.Refunds: {}}
	for _, m := range want {
		id := m.Event.EventID
		if m.Topic == workload.Refunds {
			id = m.Refund.RefundID
		}
		wantBy[m.Topic][string(m.Key)+" "+id]++
	}
	for topicOf, name := range map[workload.Topic]string{workload.Payments: topic, workload.Refunds: refunds} {
		got := map[string]int{}
		for _, m := range k.ReadAll(ctx, t, name, 2) {
			var ids struct {
				EventID  string `json:"event_id"`
				RefundID string `json:"refund_id"`
			}
			if err := json.Unmarshal(m.Value, &ids); err != nil {
				t.Fatal(err)
			}
			id := ids.EventID
			if topicOf == workload.Refunds {
				id = ids.RefundID
			}
			got[string(m.Key)+" "+id]++
		}
		if !maps.Equal(got, wantBy[topicOf]) {
			t.Errorf("%s: read back %v, want %v", name, got, wantBy[topicOf])
		}
	}
	if !strings.Contains(out.String(), " refunds)") {
		t.Errorf("output lacks the refunds:\n%s", out.String())
	}
}
