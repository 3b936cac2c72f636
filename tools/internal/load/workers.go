package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stopTimeout bounds a worker's drain after SIGTERM (its SHUTDOWN_TIMEOUT
// is 10s); then it is killed.
const stopTimeout = 20 * time.Second

// workerProc is one billing-worker process and the goroutine awaiting it.
type workerProc struct {
	id       int
	cmd      *exec.Cmd
	httpAddr string
	out      *tail
	done     chan struct{} // closed when the process has exited; then err is set
	err      error
}

// startWorker runs the binary with the run's environment; env entries later
// in the list win (os/exec keeps the last of a duplicate key).
func startWorker(o Options, st *stage, id int) (*workerProc, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append([]string(nil), o.BaseEnv...)
	for k, v := range st.WorkerEnv(id, o.RedisAddrs, httpAddr, o.WorkerLogLevel) {
		env = append(env, k+"="+v)
	}
	env = append(env, o.WorkerEnv...)
	w := &workerProc{id: id, httpAddr: httpAddr, out: &tail{max: 16 << 10}, done: make(chan struct{})}
	w.cmd = exec.Command(o.WorkerBinary)
	w.cmd.Env, w.cmd.Stdout, w.cmd.Stderr = env, w.out, w.out
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("load: start worker %d (%s): %w", id, o.WorkerBinary, err)
	}
	go func() {
		defer close(w.done)
		w.err = w.cmd.Wait()
	}()
	return w, nil
}

func (w *workerProc) pid() int { return w.cmd.Process.Pid }

// exited reports an early exit (any exit before stop is one) with the
// process's last output.
func (w *workerProc) exited() error {
	select {
	case <-w.done:
		return fmt.Errorf("load: worker %d exited during the run (%v); its last output:\n%s", w.id, w.err, w.out)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for a clean exit, killing the process after
// stopTimeout. An exit other than 0 after SIGTERM is an error.
func (w *workerProc) stop() error {
	select {
	case <-w.done:
		return w.exitErr("before it was stopped")
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM) // fails only if it already exited: done says so
	select {
	case <-w.done:
		return w.exitErr("after SIGTERM")
	case <-time.After(stopTimeout):
		_ = w.cmd.Process.Kill()
		<-w.done
		return fmt.Errorf("load: worker %d still running %v after SIGTERM: killed; its last output:\n%s", w.id, stopTimeout, w.out)
	}
}

func (w *workerProc) exitErr(when string) error {
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("load: worker %d exited %s: %w; its last output:\n%s", w.id, when, w.err, w.out)
}

// scraped is what the load tool reads from a worker's /metrics.
type scraped struct {
	heapBytes  float64
	goroutines int
	// batches and batchEvents are the consumer's handler calls so far and
	// the events they carried (billing_batch_size's count and sum).
	batches, batchEvents float64
	// tx is billing_ledger_transaction_seconds so far: cumulative counts by
	// upper bound, +Inf last.
	tx []bucket
	// retries is billing_ledger_deadlock_retries_total so far.
	retries float64
}

// scrape reads go_memstats_heap_inuse_bytes, go_goroutines, the
// billing_batch_size histogram's count and sum, the
// billing_ledger_transaction_seconds buckets and
// billing_ledger_deadlock_retries_total from the worker's /metrics; a
// metric's labelled series are summed (the consumer's carry a topic).
func (w *workerProc) scrape(ctx context.Context) (scraped, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.httpAddr+"/metrics", nil)
	if err != nil {
		return scraped{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return scraped{}, fmt.Errorf("load: read /metrics: %w", err)
	}
	heap, okHeap := families["go_memstats_heap_inuse_bytes"]
	goroutines, okG := families["go_goroutines"]
	if !okHeap || !okG {
		return scraped{}, errors.New("load: /metrics lacks go_memstats_heap_inuse_bytes or go_goroutines")
	}
	out := scraped{heapBytes: gaugeSum(heap), goroutines: int(gaugeSum(goroutines))}
	for _, m := range families["billing_batch_size"].GetMetric() {
		out.batches += float64(m.GetHistogram().GetSampleCount())
		out.batchEvents += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families["billing_ledger_transaction_seconds"].GetMetric() {
		out.tx = addBuckets(out.tx, cumulative(m.GetHistogram()))
	}
	for _, m := range families["billing_ledger_deadlock_retries_total"].GetMetric() {
		out.retries += m.GetCounter().GetValue()
	}
	return out, nil
}

func gaugeSum(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum
}

// freeAddr is a loopback address with a port free right now, for a worker's
// HTTP_ADDR (its /metrics is scraped).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("load: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
