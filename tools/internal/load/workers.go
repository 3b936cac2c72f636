package load

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/quotaflow/billing/internal/workerproc"
)

// stopTimeout bounds a worker's drain after SIGTERM (its SHUTDOWN_TIMEOUT
// is 10s); then it is killed.
const stopTimeout = 20 * time.Second

// workerProc is one billing-worker process.
type workerProc struct {
	*workerproc.Proc
	id  int
	out *workerproc.Output
}

// startWorker runs the binary with the run's environment; env entries later
// in the list win (os/exec keeps the last of a duplicate key).
func startWorker(o Options, st *stage, id int) (*workerProc, error) {
	addr, err := workerproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	env := append([]string(nil), o.BaseEnv...)
	for k, v := range st.WorkerEnv(id, o.RedisAddrs, addr, o.WorkerLogLevel) {
		env = append(env, k+"="+v)
	}
	env = append(env, o.WorkerEnv...)
	w := &workerProc{id: id, out: &workerproc.Output{Max: 16 << 10}}
	// Not the run's context: an interrupted run still stops its workers with SIGTERM.
	if w.Proc, err = workerproc.Start(context.Background(), o.WorkerBinary, addr, env, w.out); err != nil {
		return nil, fmt.Errorf("load: worker %d: %w", id, err)
	}
	return w, nil
}

// exited reports an early exit (any exit before stop is one) with the
// process's last output.
func (w *workerProc) exited() error {
	if gone, err := w.Exited(); gone {
		return fmt.Errorf("load: worker %d exited during the run (%v); its last output:\n%s", w.id, err, w.out)
	}
	return nil
}

// stop sends SIGTERM and waits for a clean exit, killing the process after
// stopTimeout. An exit other than 0 after SIGTERM is an error.
func (w *workerProc) stop() error {
	if err := w.End(syscall.SIGTERM, stopTimeout); err != nil {
		return fmt.Errorf("load: worker %d: %w; its last output:\n%s", w.id, err, w.out)
	}
	return nil
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

// scrape reads the worker's /metrics; a metric's labelled series are summed
// (the consumer's carry a topic).
func scrape(ctx context.Context, addr string) (scraped, error) {
	m, err := workerproc.Scrape(ctx, addr)
	if err != nil {
		return scraped{}, err
	}
	if _, ok := m["go_memstats_heap_inuse_bytes"]; !ok {
		return scraped{}, errors.New("load: /metrics lacks go_memstats_heap_inuse_bytes")
	}
	return scraped{heapBytes: m.Sum("go_memstats_heap_inuse_bytes"), goroutines: int(m.Sum("go_goroutines")),
		batches: m.Sum("billing_batch_size_count"), batchEvents: m.Sum("billing_batch_size_sum"),
		tx: m.Buckets("billing_ledger_transaction_seconds"), retries: m.Sum("billing_ledger_deadlock_retries_total")}, nil
}
