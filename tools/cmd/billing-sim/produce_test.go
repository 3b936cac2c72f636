package main

import (
	"bytes"
	"context"
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
