package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

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

// start runs the real binary against the test's own services and waits until /readyz says ready.
func start(t *testing.T) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	k := testenv.NewKafka(t)
	r := testenv.NewRedis(t)
	db := testenv.NewMySQL(t)
	port := testenv.FreePort(t)
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(k.Brokers, ","), "KAFKA_TOPIC="+k.Topic(t, 2), "KAFKA_DLQ_TOPIC="+k.Topic(t, 1),
		"KAFKA_GROUP=g-"+testenv.UniqueName(t, "g"), "REDIS_ADDR="+r.Addr, "REDIS_KEY_PREFIX="+r.Keys.Prefix(),
		"MYSQL_DSN="+db.DSN, "IDGEN_WORKER_ID=7", fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port), "SHUTDOWN_TIMEOUT=5s")
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
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, out, exit
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
	cmd, out, exit := start(t)
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

// A second signal while draining exits at once, non-zero.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd, out, exit := start(t)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(20 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exit:
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) {
			// The drain may already have finished: a clean exit is acceptable too.
			t.Logf("exit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("second signal did not exit at once\n%s", out.String())
	}
}

// A bad environment stops the program at start with every broken variable named.
func TestBadEnvironmentNamesTheVariables(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), binary)
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS=", "LOCK_TTL=forever", "IDGEN_WORKER_ID=4096", "MYSQL_DSN=root:hunter2@tcp(db")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	for _, want := range []string{"KAFKA_BROKERS", `LOCK_TTL="forever"`, `IDGEN_WORKER_ID="4096"`, "MYSQL_DSN"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
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
