package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/tools/internal/load"
)

func TestLoadFlags(t *testing.T) {
	d := deps{cfg: config.Config{MySQL: config.MySQL{DSN: "root@tcp(127.0.0.1:3306)/billing"}}, stderr: io.Discard}
	f, err := parseLoadFlags([]string{"--workers", "2", "--worker-env", "WORKER_BATCH_SIZE=512", "--worker-env", "WORKER_LANES=8", "--rate", "10000/s"}, d)
	if err != nil {
		t.Fatal(err)
	}
	if f.o.Workers != 2 || f.o.Rate != 10000 || f.o.Events != load.DefaultEvents || strings.Join(f.o.WorkerEnv, " ") != "WORKER_BATCH_SIZE=512 WORKER_LANES=8" {
		t.Fatalf("options %+v", f.o)
	}
	// --soak sets the events from the rate and the duration, 5000/s by default.
	if f, err = parseLoadFlags([]string{"--soak", "10m"}, d); err != nil || f.o.Rate != 5000 || f.o.Events != 3_000_000 || f.o.Timeout < 10*time.Minute {
		t.Fatalf("soak: %+v, %v", f.o, err)
	}
	if f, err = parseLoadFlags([]string{"--refunds", "0.1", "--versus-no-refunds", "2"}, d); err != nil || f.o.Refunds != 0.1 || f.versusNone != 2 {
		t.Fatalf("refunds: %+v, %v", f, err)
	}
	if f.o.RefundsOrder != load.RefundsAfter {
		t.Fatalf("refunds order %q, want after by default", f.o.RefundsOrder)
	}
	if f, err = parseLoadFlags([]string{"--refunds", "0.1", "--refunds-order", "racing"}, d); err != nil || f.o.RefundsOrder != load.RefundsRacing {
		t.Fatalf("--refunds-order racing: %+v, %v", f.o, err)
	}
	for _, args := range [][]string{
		{"--versus-no-refunds", "2"},
		{"--refunds", "0.1", "--refunds-order", "before"},
		{"--refunds-order", "racing"}, // without --refunds
	} {
		if _, err := parseLoadFlags(args, d); err != errUsage {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	// --rate 0 --soak is idle: no events but the one of the wake.
	if f, err = parseLoadFlags([]string{"--rate", "0", "--soak", "60s"}, d); err != nil || f.o.Rate != 0 || f.o.Idle != time.Minute || f.o.Timeout < 10*time.Minute {
		t.Fatalf("idle: %+v, %v", f.o, err)
	}
	if _, err := parseLoadFlags([]string{"--rate", "0", "--soak", "60s", "--vary", "WORKER_LANES=1,2"}, d); err != errUsage {
		t.Fatalf("idle sweep: %v, want a usage error", err)
	}
	if _, err := parseLoadFlags([]string{"--workers", "two"}, d); err != errUsage {
		t.Fatalf("bad flag: %v", err)
	}
}

func TestWorkerBinary(t *testing.T) {
	if got, err := workerBinary("/opt/billing-worker"); err != nil || got != "/opt/billing-worker" {
		t.Fatalf("given: %q, %v", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := workerBinary(""); err == nil || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("none anywhere: %v, want advice to build it", err)
	}
}

func TestWriteLoad(t *testing.T) {
	res := load.Result{
		Events: 1000, EventsPerSec: 5000, ElapsedS: 0.2,
		Setup: load.Setup{Merchants: 10, Workers: 1, Embedded: true},
		CPU: []load.ProcessCPU{
			{Name: "worker-0", PID: 7, Measured: true, CPUSeconds: 0.1, USPerEvent: 100, Cores: 0.5},
			{Name: "mariadbd", Note: "n/a: not a local process"},
		},
		Baseline: &load.Baseline{Events: 100, EventsPerSec: 500, Ratio: 10},
		Paced: &load.Paced{Rate: 1000, ScheduleS: 1, KeptUp: true, Latency: load.Latency{Count: 900, P50MS: 3, P99MS: 9, MaxMS: 12},
			LedgerTx: &load.LedgerTx{Count: 40, P50MS: 2.5, P99MS: 7.5}},
		InnoDB: load.InnoDB{Deadlocks: scenario.Deadlocks{Server: 3, Per100k: 300}}, LedgerRetries: 4,
		Memory: []load.Memory{{RSSMinMiB: 40, RSSMaxMiB: 42, Samples: []load.Sample{{AtS: 1, RSSMiB: 40}, {AtS: 2, RSSMiB: 42}}}},
	}
	var out bytes.Buffer
	writeLoad(&out, res, true)
	for _, want := range []string{"5000 events/s", "rowlock 500 events/s", "10.0x", "p99 9.0 ms", "kept up", "visible: p50 2.5 ms, p99 7.5 ms (40 attempts", "n/a", "RSS 40-42 MiB", "RSS   42.0 MiB",
		"deadlocks   3 on the server, 300.0 per 100,000 events", "retried 4 ledger transactions"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	path := filepath.Join(t.TempDir(), "load.json")
	if err := writeJSON(path, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back load.Result
	if err := json.Unmarshal(b, &back); err != nil || back.EventsPerSec != 5000 || back.Paced.Latency.P99MS != 9 || back.Paced.LedgerTx.P99MS != 7.5 ||
		back.InnoDB.Deadlocks.Per100k != 300 || back.LedgerRetries != 4 {
		t.Fatalf("JSON: %v, %+v", err, back)
	}
}

func TestWriteIdle(t *testing.T) {
	res := load.Result{
		Setup: load.Setup{Workers: 1, Partitions: 6, Embedded: true},
		Idle:  &load.Idle{SettleS: 5, WindowS: 60, Cores: 0.0042, WakeMS: 57.5},
		CPU: []load.ProcessCPU{
			{Name: "worker-0", PID: 7, Measured: true, CPUSeconds: 0.12, Cores: 0.002},
			{Name: "mariadbd", PID: 8, Measured: true, CPUSeconds: 0.13, Cores: 0.0022, QuietCores: 0.01},
		},
	}
	var out bytes.Buffer
	writeIdle(&out, res)
	for _, want := range []string{"60.0s with no traffic", "0.0042 cores busy", "57.5 ms", "0.0020", "0.010 cores in the second before the workers started"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
