package bench

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/workload"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Latencies
	}{
		{"empty", nil, Latencies{}},
		{"one", ms(7), Latencies{P50: 7 * time.Millisecond, P99: 7 * time.Millisecond, P999: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{"unsorted four", ms(4, 1, 3, 2), Latencies{P50: 2 * time.Millisecond, P99: 4 * time.Millisecond, P999: 4 * time.Millisecond, Max: 4 * time.Millisecond}},
		{"1..100", ms(hundred...), Latencies{P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, P999: 100 * time.Millisecond, Max: 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summarize(tt.in); got != tt.want {
				t.Fatalf("summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func benchEvents(t *testing.T, n int) []event.PaymentSucceeded {
	t.Helper()
	msgs, err := workload.Generate(workload.Config{Seed: 9, Merchants: 50, Skew: workload.Skew{Kind: workload.Hot, Param: 0.2}}, n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]event.PaymentSucceeded, n)
	for i, m := range msgs {
		out[i] = m.Event
	}
	return out
}

func TestLanesKeepMerchantsTogetherAndInOrder(t *testing.T) {
	events := benchEvents(t, 3000)
	srcs := sources(events, 7, 64, true)
	laneOfMerchant := map[string]int{}
	pos := map[string]int{}
	for i, e := range events {
		pos[e.EventID] = i
	}
	total := 0
	for i, src := range srcs {
		last := -1
		for b := src.next(); len(b) > 0; b = src.next() {
			if len(b) > 64 {
				t.Fatalf("batch of %d > 64", len(b))
			}
			for _, e := range b {
				if l, ok := laneOfMerchant[e.MerchantID]; ok && l != i {
					t.Fatalf("merchant %s in lanes %d and %d", e.MerchantID, l, i)
				}
				laneOfMerchant[e.MerchantID] = i
				if pos[e.EventID] <= last {
					t.Fatalf("lane %d out of order at %s", i, e.EventID)
				}
				last = pos[e.EventID]
				total++
			}
		}
	}
	if total != len(events) {
		t.Fatalf("lanes hold %d events, want %d", total, len(events))
	}
}

func TestSharedQueueGivesEachEventOnce(t *testing.T) {
	events := benchEvents(t, 5000)
	srcs := sources(events, 8, 256, false)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, src := range srcs {
		wg.Go(func() {
			for b := src.next(); len(b) > 0; b = src.next() {
				if len(b) != 1 {
					t.Errorf("per-event batch of %d", len(b))
				}
				mu.Lock()
				seen[b[0].EventID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != len(events) {
		t.Fatalf("%d distinct events handed out, want %d", len(seen), len(events))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s handed out %d times", id, n)
		}
	}
}

func TestAdminDSN(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name     string
		explicit string
		env      map[string]string
		want     string
		wantErr  bool
	}{
		{name: "default", want: "root@tcp(127.0.0.1:3306)/?parseTime=true"},
		{name: "MYSQL_DSN's server", env: map[string]string{"MYSQL_DSN": "u:p@tcp(db:3307)/billing?parseTime=true"}, want: "u:p@tcp(db:3307)/?parseTime=true"},
		{name: "bench variable wins", env: map[string]string{"MYSQL_DSN": "u@tcp(a:1)/x?parseTime=true", "BILLING_BENCH_MYSQL_DSN": "v@tcp(b:2)/"}, want: "v@tcp(b:2)/?parseTime=true"},
		{name: "flag wins", explicit: "w@tcp(c:3)/y", env: map[string]string{"BILLING_BENCH_MYSQL_DSN": "v@tcp(b:2)/"}, want: "w@tcp(c:3)/?parseTime=true"},
		{name: "malformed", explicit: "not a dsn", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AdminDSN(tt.explicit, env(tt.env))
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("AdminDSN = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDatabaseName(t *testing.T) {
	if got := databaseName("redis-per-event", "20261129_085000_ab12"); got != "billing_bench_redis_per_event_20261129_085000_ab12" {
		t.Fatalf("databaseName = %q", got)
	}
	if got := databaseName(strings.Repeat("x", 80), "r"); len(got) != 64 {
		t.Fatalf("long name not cut to 64: %d", len(got))
	}
}

func TestParseStrategies(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "rowlock,redis-per-event", want: "rowlock,redis-per-event"},
		{in: " pipeline , rowlock ", want: "pipeline,rowlock"},
		{in: "rowlock,rowlock", wantErr: "twice"},
		{in: "rowlock,optimistic", wantErr: "unknown strategy"},
		{in: ",", wantErr: "no strategy"},
	}
	for _, tt := range tests {
		got, err := ParseStrategies(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseStrategies(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tt.want {
			t.Errorf("ParseStrategies(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestConfigValidateReportsEverything(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events, cfg.Callers, cfg.Quota, cfg.KeyPrefix, cfg.Strategies = 0, 0, 0, "{x}", []string{"nope"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"events 0", "callers 0", "quota 0", "braces", "unknown strategy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
}

func TestReportRatiosAndOutput(t *testing.T) {
	ok := true
	pass := Check{LedgerOK: true, BalancesOK: true, NonNegative: true, LedgerRows: 10, Debits: 9, Rejected: 1}
	withRedis := pass
	withRedis.RedisOK = &ok
	rep := &Report{Results: []Result{
		{Strategy: NameRowLock, Events: 10, EventsPerSec: 100, Elapsed: 100 * time.Millisecond, Latency: Latencies{P50: time.Millisecond}, Check: pass},
		{Strategy: NameRedisPerEvent, Events: 10, EventsPerSec: 150, Check: withRedis, Counters: map[string]int64{"lock_retries": 3}},
		{Strategy: NamePipeline, Events: 10, Error: "not wired"},
	}}
	rep.finish()
	if rep.Results[0].VsRowLock != 1 || rep.Results[1].VsRowLock != 1.5 || rep.Results[2].VsRowLock != 0 {
		t.Fatalf("ratios %v %v %v", rep.Results[0].VsRowLock, rep.Results[1].VsRowLock, rep.Results[2].VsRowLock)
	}
	if rep.Results[0].ElapsedMS != 100 || rep.Results[0].P50MS != 1 {
		t.Fatalf("ms fields %+v", rep.Results[0])
	}
	if rep.OK() {
		t.Fatal("report with a failed strategy is OK")
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []struct {
			Strategy  string  `json:"strategy"`
			VsRowLock float64 `json:"vs_rowlock"`
			Check     struct {
				RedisOK *bool `json:"redis_ok"`
			} `json:"check"`
		} `json:"results"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Results[1].VsRowLock != 1.5 || back.Results[0].Check.RedisOK != nil || back.Results[1].Check.RedisOK == nil {
		t.Fatalf("JSON round trip: %s", string(js))
	}
}
