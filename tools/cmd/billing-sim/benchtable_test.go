package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/tools/internal/bench"
)

func TestBenchTable(t *testing.T) {
	ok := true
	pass := bench.Check{LedgerOK: true, BalancesOK: true, NonNegative: true, LedgerRows: 10, Debits: 9, Rejected: 1}
	withRedis := pass
	withRedis.RedisOK = &ok
	rep := &bench.Report{Results: []bench.Result{
		{Strategy: bench.NameRowLock, Events: 10, EventsPerSec: 100, VsRowLock: 1, Latency: bench.Latencies{P50: time.Millisecond}, Check: pass},
		{Strategy: bench.NameRedisPerEvent, Events: 10, EventsPerSec: 150, VsRowLock: 1.5, Check: withRedis, Counters: map[string]int64{"lock_retries": 3}},
		{Strategy: bench.NamePipeline, Events: 10, Error: "not wired", Deadlocks: scenario.Deadlocks{Server: 2, Per100k: 20000}},
	}}
	var table bytes.Buffer
	if err := writeBenchTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1.50x", "1.00ms", "lock_retries=3", "pipeline FAILED: not wired", "n/a",
		"pipeline: deadlocks 2 on the server, 20000.0 per 100,000 events (Innodb_deadlocks, server-wide"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}
