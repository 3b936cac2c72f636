package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workerproc"
)

// proc is one billing-worker process slot: the real binary, started, killed
// and restarted (each start an incarnation) with the same worker ID, like a
// StatefulSet pod. Its stderr (JSON logs) is kept and printed only when the
// test fails.
type proc struct {
	t    *testing.T
	ctx  context.Context // ends with the test: exec.CommandContext kills what is left
	name string
	env  map[string]string

	mu    sync.Mutex
	cur   *workerproc.Proc // the current incarnation
	runs  int
	logs  workerproc.Output
	final samples // the last scrape of every earlier incarnation, summed
}

// startProc starts a worker process with worker ID id.
func (g *rig) startProc(id int, override map[string]string) *proc {
	g.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g.t.Cleanup(cancel)
	p := &proc{t: g.t, ctx: ctx, name: fmt.Sprintf("worker-%d", id), env: g.workerEnv(id, override), final: samples{}}
	g.t.Cleanup(func() {
		p.Kill()
		if g.t.Failed() {
			g.t.Logf("--- %s stderr (last lines, all incarnations) ---\n%s", p.name, lastLines(p.logs.String(), 150))
		}
	})
	p.Start()
	return p
}

// Start starts a new incarnation on a fresh HTTP port.
func (p *proc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.t.Fatalf("%s: Start while running", p.name)
	}
	p.runs++
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(p.t))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range slices.Sorted(maps.Keys(p.env)) {
		env = append(env, k+"="+p.env[k])
	}
	fmt.Fprintf(&p.logs, "=== %s incarnation %d on %s ===\n", p.name, p.runs, addr)
	cur, err := workerproc.Start(p.ctx, workerBinary, addr, env, &p.logs)
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	p.cur = cur
}

// Kill ends the incarnation with SIGKILL (kill -9) and waits for it: no
// drain, no commit, no lease or lock release.
func (p *proc) Kill() { p.end(syscall.SIGKILL) }

// Stop ends the incarnation with SIGTERM, as Kubernetes does, and waits for
// its drain (SHUTDOWN_TIMEOUT) to finish.
func (p *proc) Stop() { p.end(syscall.SIGTERM) }

func (p *proc) end(sig syscall.Signal) {
	p.mu.Lock()
	cur := p.cur
	p.cur = nil
	p.mu.Unlock()
	if cur == nil {
		return
	}
	err := cur.End(sig, 30*time.Second)
	fmt.Fprintf(&p.logs, "=== %s incarnation ended by %v: %v ===\n", p.name, sig, err)
	switch {
	case errors.Is(err, workerproc.ErrExited):
		p.t.Errorf("%s had exited by itself: %v", p.name, err)
	case errors.Is(err, workerproc.ErrTimeout):
		p.t.Errorf("%s: %v", p.name, err)
	case sig == syscall.SIGTERM && err != nil:
		p.t.Errorf("%s did not shut down cleanly on SIGTERM: %v", p.name, err)
	}
}

// Pause freezes the process (SIGSTOP): a GC pause, a stalled VM.
func (p *proc) Pause() { p.signal(syscall.SIGSTOP) }

// Resume thaws it (SIGCONT).
func (p *proc) Resume() { p.signal(syscall.SIGCONT) }

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.cur.Signal(sig)
	}
}

// Running reports whether an incarnation is up.
func (p *proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil
}

// Addr is the ops HTTP address of the current incarnation.
func (p *proc) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return ""
	}
	return p.cur.Addr
}

// Scrape reads the current incarnation's /metrics.
func (p *proc) Scrape(ctx context.Context) (samples, error) { return workerproc.Scrape(ctx, p.Addr()) }

// ScrapeAndKill scrapes the incarnation's counters and then kills it; the
// scrape is kept, so Total sees what the dead incarnation did.
func (p *proc) ScrapeAndKill(ctx context.Context) samples {
	p.t.Helper()
	m := p.mustScrape(ctx)
	p.Kill()
	p.mu.Lock()
	p.final.Add(m)
	p.mu.Unlock()
	return m
}

// Total is the sum of the counters of every incarnation: the dead ones as
// last scraped, the current one now.
func (p *proc) Total(ctx context.Context) samples {
	p.t.Helper()
	p.mu.Lock()
	total := samples{}
	total.Add(p.final)
	p.mu.Unlock()
	if p.Running() {
		total.Add(p.mustScrape(ctx))
	}
	return total
}

// mustScrape reads /metrics, retrying for up to 10s (a worker busy with a
// fault may answer late), and fails the test rather than count what it could
// not read as zero.
func (p *proc) mustScrape(ctx context.Context) samples {
	p.t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var m samples
		if m, err = p.Scrape(ctx); err == nil {
			return m
		}
	}
	p.t.Fatalf("%s: no /metrics for 10s: %v", p.name, err)
	return nil
}

// WaitHTTP waits until the incarnation serves /healthz.
func (p *proc) WaitHTTP(ctx context.Context) error {
	return workerproc.WaitOK(ctx, "http://"+p.Addr()+"/healthz", 30*time.Second)
}

// Logs is everything the process slot wrote.
func (p *proc) Logs() string { return p.logs.String() }
