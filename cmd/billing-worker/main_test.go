package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/testenv"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "billing-worker-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "billing-worker")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build billing-worker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stack is the services a started worker runs against.
type stack struct {
	kafka *testenv.Kafka
	redis *testenv.Redis
	topic string
	port  int
}

// start runs the real binary against the test's own services, env overriding
// the defaults, and waits until /readyz says ready.
func start(t *testing.T, env ...string) (*exec.Cmd, *syncBuffer, chan error, stack) {
	t.Helper()
	s := stack{kafka: testenv.NewKafka(t), redis: testenv.NewRedis(t), port: testenv.FreePort(t)}
	s.topic = s.kafka.Topic(t, 2)
	db := testenv.NewMySQL(t)
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(s.kafka.Brokers, ","), "KAFKA_TOPIC="+s.topic, "KAFKA_DLQ_TOPIC="+s.kafka.Topic(t, 1),
		"KAFKA_GROUP=g-"+testenv.UniqueName(t, "g"), "REDIS_ADDR="+s.redis.Addr, "REDIS_KEY_PREFIX="+s.redis.Keys.Prefix(),
		"MYSQL_DSN="+db.DSN, "IDGEN_WORKER_ID=7", fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", s.port), "SHUTDOWN_TIMEOUT=5s")
	cmd.Env = append(cmd.Env, env...) // the last value of a variable wins
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", s.port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, out, exit, s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker never ready:\n%s", out.String())
		}
		select {
		case err := <-exit:
			t.Fatalf("worker exited early: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SIGTERM: the worker drains, commits, leaves the group and exits 0 within its bound.
func TestSIGTERMExitsCleanly(t *testing.T) {
	cmd, out, exit, _ := start(t)
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit within 15s of SIGTERM (SHUTDOWN_TIMEOUT=5s)\n%s", out.String())
	}
	t.Logf("exited 0 %s after SIGTERM", time.Since(began).Round(time.Millisecond))
	if !strings.Contains(out.String(), "billing-worker stopped cleanly") {
		t.Errorf("no clean-stop log line:\n%s", out.String())
	}
}

// A second signal while draining exits at once with 130 (main's forced exit).
// The worker is busy when the signals come: its batch waits on a merchant lock
// the test holds, so the first SIGTERM alone drains for 60% of SHUTDOWN_TIMEOUT
// (72s of 2m) before abandoning the batch. The bounds are apart by that much:
// still running 3s after the first signal, gone within 10s of the second.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd, out, exit, s := start(t, "SHUTDOWN_TIMEOUT=2m", "WORKER_COMMIT_INTERVAL=100ms")
	ctx := context.Background()
	const merchant = "m-held"
	if err := s.redis.Client.Set(ctx, s.redis.Keys.Lock(merchant), "held-by-the-test", 10*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(s.kafka.Brokers...), Topic: s.topic, Balancer: &kafka.Hash{}}
	defer w.Close()
	e := event.PaymentSucceeded{EventID: "e-held", PaymentID: "p-held", MerchantID: merchant, Amount: 1,
		Source: event.SourcePC, OccurredAt: time.Now().UTC()}
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(merchant), Value: e.Encode()}); err != nil {
		t.Fatal(err)
	}
	waitBusy(t, s.port, out)

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exit:
		t.Fatalf("exited (%v) on the first signal with its batch held: it did not drain\n%s", err, out.String())
	case <-time.After(3 * time.Second):
	}
	began := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exit:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("exit %v after the second signal, want exit status 130\n%s", err, out.String())
		}
		t.Logf("exited 130 %s after the second signal", time.Since(began).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("second signal did not exit within 10s (the drain would last 72s)\n%s", out.String())
	}
	if !strings.Contains(out.String(), "second signal: exiting without draining") {
		t.Errorf("no forced-exit log line:\n%s", out.String())
	}
}

// waitBusy waits until the worker's /metrics shows a message fetched and not
// released (billing_inflight above 0): a handler is holding it.
func waitBusy(t *testing.T, port int, out *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "billing_inflight{") && !strings.HasSuffix(line, " 0") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never held the event (billing_inflight stayed 0)\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A bad environment stops the program at start (exit 2, as a bad flag) with
// every broken variable named, in one JSON line of the shape every program
// ends with (logging.Failure).
func TestBadEnvironmentNamesTheVariables(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), binary)
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS=", "LOCK_TTL=forever", "IDGEN_WORKER_ID=4096", "MYSQL_DSN=root:hunter2@tcp(db", "LOG_FORMAT=json")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s", err, out)
	}
	var line struct {
		Level, Msg, Program string
		Problems            []string
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &line); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, out)
	}
	if line.Level != "error" || line.Msg != "stopped on an error" || line.Program != "billing-worker" || len(line.Problems) != 4 {
		t.Errorf("line %+v", line)
	}
	problems := strings.Join(line.Problems, "\n")
	for _, want := range []string{"KAFKA_BROKERS", `LOCK_TTL="forever"`, `IDGEN_WORKER_ID="4096"`, "MYSQL_DSN"} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "hunter2") {
		t.Errorf("output leaks the password:\n%s", out)
	}
}

// A worker whose ID is still leased by another holder waits for the lease;
// SIGTERM while it waits is a clean stop (exit 0), not a failed start.
func TestSIGTERMWhileWaitingForLease(t *testing.T) {
	k := testenv.NewKafka(t)
	r := testenv.NewRedis(t)
	db := testenv.NewMySQL(t)
	held, err := idgen.AcquireLease(context.Background(), r.Client, r.Keys, 9, idgen.Holder{Pod: "other-pod", Since: time.Now()},
		zap.NewNop(), idgen.LeaseOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(k.Brokers, ","), "KAFKA_TOPIC="+k.Topic(t, 1), "KAFKA_DLQ_TOPIC="+k.Topic(t, 1),
		"REDIS_ADDR="+r.Addr, "REDIS_KEY_PREFIX="+r.Keys.Prefix(), "MYSQL_DSN="+db.DSN,
		"IDGEN_WORKER_ID=9", "IDGEN_LEASE_TTL=1m", "HTTP_ADDR=127.0.0.1:0")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), "waiting for its lease to expire") {
		if time.Now().After(deadline) {
			t.Fatalf("worker never waited for the held lease:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("exit after SIGTERM during start-up: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit within 10s of SIGTERM\n%s", out.String())
	}
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// With Redis down every line of stderr is JSON with unique keys under
// LOG_FORMAT=json: go-redis's own complaints come through zap too.
func TestLogsAreJSONWithRedisDown(t *testing.T) {
	k := testenv.NewKafka(t)
	db := testenv.NewMySQL(t)
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(k.Brokers, ","), "KAFKA_TOPIC="+k.Topic(t, 1), "KAFKA_DLQ_TOPIC="+k.Topic(t, 1),
		"REDIS_ADDR=127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)), "MYSQL_DSN="+db.DSN,
		"IDGEN_WORKER_ID=5", "HTTP_ADDR=127.0.0.1:0", "LOG_FORMAT=json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("the worker started without Redis:\n%s", stderr.String())
	}
	var redisLines int
	for _, l := range testenv.JSONLines(t, stderr.String()) {
		if l["component"] == "redis" {
			redisLines++
		}
	}
	if redisLines == 0 {
		t.Errorf("no go-redis line routed through zap:\n%s", stderr.String())
	}
}
