package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/worker"
	"github.com/quotaflow/billing/internal/workerproc"
)

// member is a worker in the test process (worker.New, the wiring of the
// real binary), for scenarios that want the race detector on the worker's
// code while they inject faults. Its JSON log is kept and printed only when
// the test fails.
type member struct {
	t    *testing.T
	name string
	w    *worker.Worker
	logs *workerproc.Output

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// startMember starts an in-process worker with worker ID id.
func (g *rig) startMember(id int, override map[string]string) *member {
	g.t.Helper()
	env := g.workerEnv(id, map[string]string{"HTTP_ADDR": "127.0.0.1:0"})
	for k, v := range override {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedKafka, config.NeedWorkerID)
	if err != nil {
		g.t.Fatal(err)
	}
	m := &member{t: g.t, name: fmt.Sprintf("member-%d", id), logs: &workerproc.Output{}, done: make(chan error, 1)}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(m.logs), zap.InfoLevel)
	log := zap.New(core).With(zap.String("worker", m.name))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(ctx, cfg, log, worker.Options{Registry: metrics.NewRegistry()})
	if err != nil {
		cancel()
		g.t.Fatalf("%s: %v", m.name, err)
	}
	m.w, m.cancel = w, cancel
	go func() { m.done <- w.Run(ctx) }()
	g.t.Cleanup(func() {
		m.Stop()
		if g.t.Failed() {
			g.t.Logf("--- %s log (last lines) ---\n%s", m.name, lastLines(m.logs.String(), 150))
		}
	})
	return m
}

// Stop cancels the worker's context (SIGTERM in the binary) and waits for
// its drain.
func (m *member) Stop() {
	m.mu.Lock()
	cancel := m.cancel
	m.cancel = nil
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-m.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			m.t.Errorf("%s: Run: %v", m.name, err)
		}
	case <-time.After(30 * time.Second):
		m.t.Errorf("%s did not stop within 30s", m.name)
	}
}

// Scrape reads the worker's /metrics.
func (m *member) Scrape(ctx context.Context) (samples, error) {
	return workerproc.Scrape(ctx, m.w.HTTPAddr.String())
}

// Logs is everything the worker logged.
func (m *member) Logs() string { return m.logs.String() }
