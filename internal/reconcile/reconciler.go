package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/quotaflow/billing/internal/keyspace"
)

// Reconciler checks and repairs merchants' Redis quotas against MySQL. Runs
// of one Reconciler, and of several processes, may overlap: merchant locks and
// the fenced compare-and-set keep each repair single.
type Reconciler struct {
	db     *sql.DB
	rdb    redis.UniversalClient
	keys   keyspace.Keyspace
	locks  Locker
	cfg    Config
	log    *zap.Logger
	m      *Metrics
	repair *redis.Script
	now    func() time.Time
	late   time.Duration // how long after taking its id a ledger row may still commit: maxTxAge + slack

	beforeApply func(merchant string) // test hook: between the read and the repair
}

// New returns a Reconciler. db is the billing database, keys the keyspace of
// the workers, locks the merchant locks the workers take.
func New(db *sql.DB, rdb redis.UniversalClient, keys keyspace.Keyspace, locks Locker, cfg Config) (*Reconciler, error) {
	if db == nil || rdb == nil || locks == nil {
		return nil, errors.New("reconcile: nil database, redis client or locker")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{db: db, rdb: rdb, keys: keys, locks: locks, cfg: cfg, log: cfg.Logger, m: cfg.Metrics,
		repair: redis.NewScript(repairLua), now: time.Now, late: maxTxAge + slack}, nil
}

// Run reconciles every merchant (or Config.Merchants) once, appends the audit
// rows and returns the report. It never returns nil; a failure is in the
// report (Status failed, Err), with whatever was found and done before it.
func (r *Reconciler) Run(ctx context.Context) *Report {
	start := r.now()
	t := newTally()
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

// walk checks every page with Concurrency pages in flight, then retries the
// merchants found busy once.
func (r *Reconciler) walk(ctx context.Context, t *tally) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.Concurrency)
	next := r.pages()
	var listErr error
	for {
		page, err := next(gctx)
		if err != nil || len(page) == 0 {
			listErr = err
			break
		}
		g.Go(func() error { return r.firstPass(gctx, page, t) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if listErr != nil {
		return listErr
	}
	return r.retryBusy(ctx, t)
}

// firstPass audits the ledger of a page, then checks its quota hashes.
func (r *Reconciler) firstPass(ctx context.Context, page []string, t *tally) error {
	found, err := r.ledgerPass(ctx, page)
	if err != nil {
		return err
	}
	held := t.addLedger(len(page), found)
	out, err := r.checkPage(ctx, page, held)
	t.addPage(out, false)
	return err
}

// retryBusy checks once more, after BusyRetryDelay, the merchants a worker
// held during the first pass. Those still busy are reported as busy.
func (r *Reconciler) retryBusy(ctx context.Context, t *tally) error {
	busy := t.takeBusy()
	if len(busy) == 0 {
		return nil
	}
	timer := time.NewTimer(r.cfg.BusyRetryDelay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		t.addPage(pageOutcome{busy: busy}, true)
		return ctx.Err()
	case <-timer.C:
	}
	parts := slices.Collect(slices.Chunk(busy, r.cfg.PageSize))
	for i, page := range parts {
		out, err := r.checkPage(ctx, page, t.criticalSet())
		t.addPage(out, true)
		if err != nil {
			for _, rest := range parts[i+1:] {
				t.addPage(pageOutcome{busy: rest}, true)
			}
			return err
		}
	}
	return nil
}

// pages returns the page source: Config.Merchants in chunks, or every
// merchant_balance row by keyset pagination on the primary key.
func (r *Reconciler) pages() func(context.Context) ([]string, error) {
	if len(r.cfg.Merchants) > 0 {
		ids := append([]string(nil), r.cfg.Merchants...)
		sort.Strings(ids)
		parts := slices.Collect(slices.Chunk(slices.Compact(ids), r.cfg.PageSize))
		return func(context.Context) ([]string, error) {
			if len(parts) == 0 {
				return nil, nil
			}
			p := parts[0]
			parts = parts[1:]
			return p, nil
		}
	}
	after := ""
	return func(ctx context.Context) ([]string, error) {
		ids, err := listMerchants(ctx, r.db, after, r.cfg.PageSize)
		if len(ids) > 0 {
			after = ids[len(ids)-1]
		}
		return ids, err
	}
}

func (r *Reconciler) logRun(rep *Report) {
	fields := []zap.Field{zap.Int64("run_id", rep.RunID), zap.String("status", string(rep.Status)),
		zap.Bool("dry_run", rep.DryRun), zap.Duration("took", rep.FinishedAt.Sub(rep.StartedAt)),
		zap.Int64("checked", rep.Checked), zap.Int64("clean", rep.Clean), zap.Int64("busy", rep.Busy),
		zap.Int64("drifted", rep.Drifted), zap.Int64("repaired", rep.Repaired), zap.Int64("abs_drift", rep.AbsDrift),
		zap.Int("findings", len(rep.Findings))}
	if rep.Error != "" {
		r.log.Error("reconcile run failed", append(fields, zap.String("error", rep.Error))...)
		return
	}
	r.log.Info("reconcile run", fields...)
}
