package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/sqltx"
)

// IDSource issues unique ledger row ids (Snowflake ids in production).
// NextIDs fills every element of dst or returns an error.
type IDSource interface {
	NextIDs(dst []int64) error
}

// Options tunes a Store. The zero value is valid.
type Options struct {
	// InsertChunk is the most rows one prepared INSERT carries (default
	// 1024, at least 64), rounded down to a power of two: a batch is written
	// in chunks of power-of-two sizes, a few statement shapes, each prepared
	// once, and the fewer than 64 rows left in one plain INSERT.
	InsertChunk int
	// MaxRowsInFlight bounds the rows Commit writes at once (default 1024;
	// negative: no bound; a larger batch waits for all of it): concurrent
	// multi-row inserts contend inside InnoDB more than they run in parallel.
	MaxRowsInFlight int
	// Events are the balance events written to the outbox.
	Events Events
}

func (o *Options) setDefaults() {
	if o.InsertChunk <= 0 {
		o.InsertChunk = 1024
	}
	o.InsertChunk = max(o.InsertChunk, minPrepared)
	if o.MaxRowsInFlight == 0 {
		o.MaxRowsInFlight = 1024
	}
}

// Store reads and writes the ledger and the balances.
type Store struct {
	db       *gorm.DB
	sql      *sql.DB     // db's pool: the write path's transactions
	stmts    *statements // prepared on sql
	ids      IDSource
	metrics  *Metrics
	opts     Options
	now      func() time.Time
	inFlight *semaphore.Weighted // rows being written (MaxRowsInFlight); nil: no bound
}

// New returns a Store on db. ids issues the primary keys of new rows; m may be
// nil (metrics are then kept but not registered anywhere).
func New(db *gorm.DB, ids IDSource, m *Metrics, opts Options) (*Store, error) {
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	opts.setDefaults()
	// Our own transactions: no implicit ones, no SAVEPOINTs, no hooks.
	db = db.Session(&gorm.Session{SkipDefaultTransaction: true, SkipHooks: true})
	pool, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("ledger: connection pool: %w", err)
	}
	st := &Store{db: db, sql: pool, stmts: newStatements(pool), ids: ids, metrics: m, opts: opts, now: time.Now}
	if opts.MaxRowsInFlight > 0 {
		st.inFlight = semaphore.NewWeighted(int64(opts.MaxRowsInFlight))
	}
	return st, nil
}

// MaxTxAge bounds each Commit or Grant transaction attempt, which takes fresh
// row ids: a row lands with an id at most MaxTxAge old (plus a COMMIT's reply
// time). The reconciler's ledger checkpoints rely on it.
const MaxTxAge = 10 * time.Second

// freshIDs lists the rows that Commit gives ids (those without one).
func freshIDs(rows []Row) []int {
	var fresh []int
	for i := range rows {
		if rows[i].ID == 0 {
			fresh = append(fresh, i)
		}
	}
	return fresh
}

// assignIDs gives the rows at fresh new ids, in one call to the IDSource.
func (s *Store) assignIDs(rows []Row, fresh []int) error {
	if len(fresh) == 0 {
		return nil
	}
	ids := make([]int64, len(fresh))
	if err := s.ids.NextIDs(ids); err != nil {
		return fmt.Errorf("ledger: row ids: %w", err)
	}
	for j, i := range fresh {
		rows[i].ID = ids[j]
	}
	return nil
}

// Close releases the prepared statements; the pool is the caller's.
func (s *Store) Close() error { return s.stmts.Close() }

// inTx runs fn in a GORM transaction, as retryTx.
func (s *Store) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.retryTx(ctx, func(ctx context.Context) error { return s.db.WithContext(ctx).Transaction(fn) })
}

// inSQLTx runs fn in a database/sql transaction, as retryTx.
func (s *Store) inSQLTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.inSQLTxOpts(ctx, nil, fn)
}

func (s *Store) inSQLTxOpts(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.retryTx(ctx, func(ctx context.Context) error {
		return sqltx.Run(ctx, s.sql, opts, func(tx *sql.Tx) error { return fn(ctx, tx) })
	})
}

// retryTx runs one transaction per attempt, each bounded by MaxTxAge, again
// after a deadlock or a lock wait timeout (RetryDeadlocks).
func (s *Store) retryTx(ctx context.Context, tx func(ctx context.Context) error) error {
	return sqltx.RetryDeadlocks(ctx, s.metrics.deadlockRetries.Inc, func() error {
		start := time.Now()
		tctx, cancel := context.WithTimeout(ctx, MaxTxAge)
		defer cancel()
		err := tx(tctx)
		s.metrics.txSeconds.Observe(time.Since(start).Seconds())
		return err
	})
}

// admit waits until rows more rows may be written (MaxRowsInFlight) and
// returns the function that gives them back. Waiting ends with ctx.
func (s *Store) admit(ctx context.Context, rows int) (release func(), err error) {
	if s.inFlight == nil {
		return func() {}, nil
	}
	n := int64(min(rows, s.opts.MaxRowsInFlight))
	if s.inFlight.TryAcquire(n) {
		s.metrics.commitWaitSeconds.Observe(0)
		return func() { s.inFlight.Release(n) }, nil
	}
	start := time.Now()
	if err := s.inFlight.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("ledger: waiting to write %d rows: %w", rows, err)
	}
	s.metrics.commitWaitSeconds.Observe(time.Since(start).Seconds())
	return func() { s.inFlight.Release(n) }, nil
}
