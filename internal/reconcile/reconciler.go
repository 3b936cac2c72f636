// Package reconcile compares each merchant's Redis quota with the MySQL truth,
// reports every disagreement and repairs Redis, never MySQL. The README's
// reconciler paragraphs state the rules; classify decides, the rest is I/O.
package reconcile

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
)

//go:embed repair.lua
var repairLua string

// Locker takes the merchant locks the workers take, one try each.
type Locker struct{ c *lock.Client }

// NewLocker wraps a lock client.
func NewLocker(c *lock.Client) Locker { return Locker{c} }

// Reconciler checks and repairs merchants' Redis quotas against MySQL. Runs
// may overlap, also across processes: merchant locks and the fenced
// compare-and-set keep each repair single.
type Reconciler struct {
	db     *sql.DB
	rdb    redis.UniversalClient
	keys   keyspace.Keyspace
	locks  *lock.Client
	cfg    Config
	log    *zap.Logger
	m      *Metrics
	repair *redis.Script
	now    func() time.Time

	beforeLock  func(merchant string) // test hook: between reading the layout and taking its locks
	beforeApply func(merchant string) // test hook: between the read and the repair
}

// New returns a Reconciler over the workers' database, Redis, keyspace and locks.
func New(db *sql.DB, rdb redis.UniversalClient, keys keyspace.Keyspace, locks Locker, cfg Config) (*Reconciler, error) {
	if db == nil || rdb == nil || locks.c == nil {
		return nil, errors.New("reconcile: nil database, redis client or locker")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Merchants = slices.Compact(slices.Sorted(slices.Values(cfg.Merchants)))
	return &Reconciler{db: db, rdb: rdb, keys: keys, locks: locks.c, cfg: cfg, log: cfg.Logger, m: cfg.Metrics,
		repair: redis.NewScript(repairLua), now: time.Now}, nil
}

// Run reconciles every merchant (or Config.Merchants) once, appends the audit
// rows and returns the report, never nil: a failure is in it (StatusFailed, Err).
func (r *Reconciler) Run(ctx context.Context) *Report {
	start := r.now()
	t := &tally{critical: make(map[string]bool)}
	err := r.walk(ctx, t)
	rep := t.report(start, r.now(), r.cfg.DryRun, err)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	id, aerr := writeAudit(actx, r.db, rep)
	if aerr != nil {
		rep.fail(aerr)
	}
	rep.RunID = id
	r.m.observe(rep)
	r.logRun(rep)
	return rep
}

// Loop runs Run every period, the first at once, until ctx ends, handing each
// report to done. A failed run is reported and the next one tries again.
func (r *Reconciler) Loop(ctx context.Context, every time.Duration, done func(*Report)) error {
	for ctx.Err() == nil {
		started := time.Now()
		if rep := r.Run(ctx); done != nil {
			done(rep)
		}
		select {
		case <-ctx.Done():
		case <-time.After(every - time.Since(started)):
		}
	}
	return nil
}

// walk audits the ledger and checks the quota of every page, Concurrency
// pages at once, then tries the merchants found busy once more.
func (r *Reconciler) walk(ctx context.Context, t *tally) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.Concurrency)
	var listErr error
	for after := ""; ; {
		page, err := r.page(gctx, after)
		if err != nil || len(page) == 0 {
			listErr = err
			break
		}
		after = page[len(page)-1]
		g.Go(func() error {
			found, err := r.ledgerPass(gctx, page)
			if err != nil {
				return err
			}
			t.add(Report{Findings: found, LedgerAudited: int64(len(page))})
			return r.checkPage(gctx, page, t)
		})
	}
	if err := cmp.Or(g.Wait(), listErr); err != nil {
		return err
	}
	busy := t.rep.BusyMerchants
	if len(busy) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.cfg.BusyRetryDelay):
	}
	t.rep.BusyMerchants = nil // those still busy come back
	parts := slices.Collect(slices.Chunk(busy, r.cfg.PageSize))
	for i, page := range parts {
		if err := r.checkPage(ctx, page, t); err != nil {
			t.add(Report{BusyMerchants: slices.Concat(parts[i+1:]...)})
			return err
		}
	}
	return nil
}

// page returns up to PageSize merchants after the given one, in id order:
// of Config.Merchants, or of merchant_balance (keyset pagination).
func (r *Reconciler) page(ctx context.Context, after string) ([]string, error) {
	if ms := r.cfg.Merchants; len(ms) > 0 {
		i := slices.IndexFunc(ms, func(m string) bool { return m > after })
		if i < 0 {
			return nil, nil
		}
		return ms[i:min(i+r.cfg.PageSize, len(ms))], nil
	}
	var ids []string
	err := query(ctx, r.db, "list merchants", func(rows *sql.Rows) error {
		var m string
		err := rows.Scan(&m)
		ids = append(ids, m)
		return err
	}, "SELECT merchant_id FROM merchant_balance WHERE merchant_id > ? ORDER BY merchant_id LIMIT ?", after, r.cfg.PageSize)
	return ids, err
}

// tally gathers the outcomes of a run's concurrent pages.
type tally struct {
	mu       sync.Mutex
	rep      Report
	critical map[string]bool // merchants with a critical finding: never repaired
}

func (t *tally) add(p Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range p.Findings {
		if f.Kind.critical() {
			t.critical[f.MerchantID] = true
		}
	}
	t.rep.Findings = append(t.rep.Findings, p.Findings...)
	t.rep.Checked += p.Checked
	t.rep.Clean += p.Clean
	t.rep.Repaired += p.Repaired
	t.rep.Hydrated += p.Hydrated
	t.rep.LedgerAudited += p.LedgerAudited
	t.rep.BusyMerchants = append(t.rep.BusyMerchants, p.BusyMerchants...)
	t.rep.Unknown = append(t.rep.Unknown, p.Unknown...)
}

func (t *tally) held(m string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.critical[m]
}

// report builds the run's report; err is the run's failure, if any.
func (t *tally) report(start, end time.Time, dryRun bool, err error) *Report {
	rep := t.rep
	rep.StartedAt, rep.FinishedAt, rep.DryRun = start.UTC(), end.UTC(), dryRun
	rep.Busy = int64(len(rep.BusyMerchants))
	drifted := make(map[string]bool)
	for _, f := range rep.Findings {
		if f.Kind.drift() {
			drifted[f.MerchantID] = true
		}
		if f.Kind.redisDrift() {
			rep.AbsDrift += abs(f.Delta)
		}
	}
	rep.Drifted = int64(len(drifted))
	rep.Status = statusOf(rep.Findings)
	if err != nil {
		rep.fail(err)
	}
	return &rep
}

func (r *Reconciler) logRun(rep *Report) {
	fields := []zap.Field{zap.Int64("run_id", rep.RunID), zap.String("status", string(rep.Status)),
		zap.Bool("dry_run", rep.DryRun), zap.Duration("took", rep.FinishedAt.Sub(rep.StartedAt)),
		zap.Int64("checked", rep.Checked), zap.Int64("clean", rep.Clean), zap.Int64("busy", rep.Busy),
		zap.Int64("drifted", rep.Drifted), zap.Int64("repaired", rep.Repaired), zap.Int64("hydrated", rep.Hydrated), zap.Int64("abs_drift", rep.AbsDrift),
		zap.Int("findings", len(rep.Findings))}
	if rep.Error != "" {
		r.log.Error("reconcile run failed", append(fields, zap.String("error", rep.Error))...)
		return
	}
	r.log.Info("reconcile run", fields...)
}
