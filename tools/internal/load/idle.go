package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Idle is what workers with no traffic cost, and how soon they answer the
// first event after it.
type Idle struct {
	SettleS float64 `json:"settle_s"` // after the group formed, before the window
	WindowS float64 `json:"window_s"`
	// Cores is what the workers, mariadbd and redis-server kept busy over
	// the window (the servers' include other clients' work: see QuietCores
	// of each in the CPU table, read before the workers started).
	Cores float64 `json:"cores"`
	// WakeMS is one event produced after the window, from its produce to its
	// ledger row's created_at: the producer's linger, the fetch, the lane's
	// hold (the latency budget, as for any batch that is not full) and the
	// batch up to its commit.
	WakeMS float64 `json:"wake_ms"`
}

// idle starts the workers, lets them settle, measures an Idle window with no
// event, then produces one event and times its ledger row.
func (r *run) idle(ctx context.Context) (err error) {
	o, st := r.o, r.st
	m, err := newMeter(ctx, o, st)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.stopWorkers()) }()
	for i := range o.Workers {
		w, err := startWorker(o, st, i)
		if err != nil {
			return err
		}
		r.workers = append(r.workers, w)
		m.addWorker(w)
	}
	if err := waitGroup(ctx, st.Client(), st.Group, st.Topic, o.Workers, r.workers, groupLimit); err != nil {
		return err
	}
	o.Log.Info("load: workers idle", zap.Duration("settle", o.IdleSettle), zap.Duration("window", o.Idle))
	if !sleep(ctx, o.IdleSettle) {
		return ctx.Err()
	}
	m.restart()
	began := time.Now()
	if !sleep(ctx, o.Idle) {
		return ctx.Err()
	}
	m.read()
	window := time.Since(began)
	for _, w := range r.workers {
		if err := w.exited(); err != nil {
			return err
		}
	}
	idle := &Idle{SettleS: o.IdleSettle.Seconds(), WindowS: window.Seconds()}
	r.res.CPU, _, r.res.Machine = m.results(0, window)
	for _, c := range r.res.CPU {
		if c.Measured && (strings.HasPrefix(c.Name, "worker-") || c.Name == "mariadbd" || c.Name == "redis-server") {
			idle.Cores += c.Cores
		}
	}
	r.res.Idle = idle
	r.res.ElapsedS = window.Seconds()

	var t target
	start := time.Now()
	p, err := r.produce(ctx, start, true, allTopics)
	if err != nil {
		return err
	}
	t.set(r.fill.debited+p.Summary.Amount, 0)
	if _, err := waitLedger(ctx, st.db, &t, r.workers, o.Stall, o.Log); err != nil {
		return err
	}
	var rows, wakeUS int64
	if err := st.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, ?, MIN(created_at)), 0) FROM quota_ledger WHERE id > ?",
		start.UTC(), r.fill.lastID).Scan(&rows, &wakeUS); err != nil {
		return fmt.Errorf("load: read the wake: %w", err)
	}
	if rows != int64(o.Events) {
		return fmt.Errorf("load: %d ledger rows after the idle window, want %d", rows, o.Events)
	}
	r.res.Rows = rows
	idle.WakeMS = float64(wakeUS) / 1000
	return nil
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
