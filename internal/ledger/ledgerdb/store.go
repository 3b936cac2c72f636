package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/quotaevent"
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
	// Tracer, if set, sees every statement (a GORM logger is one).
	Tracer Tracer
}

// Tracer sees each statement the Store runs, with its placeholders (never
// its values), after it ran.
type Tracer interface {
	Trace(ctx context.Context, begin time.Time, fc func() (sql string, rows int64), err error)
}

// Events says which balance events the ledger writes to the outbox
// (quota_outbox) in the transaction that moves a balance.
type Events struct {
	// PerPayment adds quota.deducted and quota.rejected for every payment
	// of a known merchant (a row each: the batch's INSERT doubles).
	PerPayment bool
	// DefaultAlerts are the thresholds of a merchant without its own.
	DefaultAlerts quotaevent.Alerts
	// Written, if set, runs after a transaction that wrote events committed
	// (the relay's Wake).
	Written func()
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
	db       *sql.DB
	stmts    *statements // prepared on db
	ids      IDSource
	metrics  *Metrics
	opts     Options
	now      func() time.Time
	inFlight *semaphore.Weighted // rows being written (MaxRowsInFlight); nil: no bound
}

// New returns a Store on db. ids issues the primary keys of new rows; m may be
// nil (metrics are then kept but not registered anywhere).
func New(db *sql.DB, ids IDSource, m *Metrics, opts Options) (*Store, error) {
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	opts.setDefaults()
	st := &Store{db: db, stmts: newStatements(db), ids: ids, metrics: m, opts: opts, now: time.Now}
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
func freshIDs(rows []ledger.Row) []int {
	var fresh []int
	for i := range rows {
		if rows[i].ID == 0 {
			fresh = append(fresh, i)
		}
	}
	return fresh
}

// assignIDs gives the rows at fresh new ids, in one call to the IDSource.
func (s *Store) assignIDs(rows []ledger.Row, fresh []int) error {
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

// inTx runs fn in a transaction of opts, one per attempt, each bounded by
// MaxTxAge, again after a deadlock or a lock wait timeout.
func (s *Store) inTx(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return sqltx.RetryDeadlocks(ctx, s.metrics.deadlockRetries.Inc, func() error {
		start := time.Now()
		tctx, cancel := context.WithTimeout(ctx, MaxTxAge)
		defer cancel()
		err := sqltx.Run(tctx, s.db, opts, func(tx *sql.Tx) error { return fn(tctx, tx) })
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

// Metrics of the ledger store.
type Metrics struct {
	deadlockRetries   prometheus.Counter
	txSeconds         prometheus.Histogram
	commitWaitSeconds prometheus.Histogram
}

// NewMetrics creates the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		deadlockRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "billing_ledger_deadlock_retries_total",
			Help: "Ledger transactions tried again after a MySQL deadlock or lock wait timeout.",
		}),
		txSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "billing_ledger_transaction_seconds",
			Help:    "Duration of one ledger transaction attempt.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		commitWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "billing_ledger_commit_wait_seconds",
			Help:    "Time a batch waited before its transaction could write its rows (Options.MaxRowsInFlight).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	if err := metrics.Register(reg, m.deadlockRetries, m.txSeconds, m.commitWaitSeconds); err != nil {
		return nil, fmt.Errorf("ledger: register metrics: %w", err)
	}
	return m, nil
}

// batchEvents lists the balance events of a transaction's rows (ledger.BatchEvents).
func (s *Store) batchEvents(rows []ledger.Row, bals []ledger.Balance) []quotaevent.Event {
	return ledger.BatchEvents(rows, bals, s.opts.Events.DefaultAlerts, s.opts.Events.PerPayment)
}

const outboxTuple = "(?, ?, ?, ?, ?, ?, ?, ?)"

// writeOutbox inserts events into quota_outbox in tx, in order (seq follows
// it). A second row for one id fails the transaction: it cannot happen
// without a second ledger row for its cause, which UNIQUE(event_id) refuses.
func (s *Store) writeOutbox(ctx context.Context, tx *sql.Tx, events []quotaevent.Event) error {
	for off := 0; off < len(events); off += maxOutboxInsert {
		part := events[off:min(off+maxOutboxInsert, len(events))]
		args := make([]any, 0, 8*len(part))
		for _, e := range part {
			var th any
			if e.Threshold != nil {
				th = *e.Threshold
			}
			args = append(args, e.ID, e.MerchantID, string(e.Type), e.BalanceBefore, e.BalanceAfter, th, e.CausedBy, e.OccurredAt)
		}
		q := "INSERT INTO quota_outbox (id, merchant_id, type, balance_before, balance_after, threshold, caused_by, occurred_at) VALUES " +
			outboxTuple + strings.Repeat(", "+outboxTuple, len(part)-1)
		if _, err := s.exec(ctx, tx, q, args); err != nil {
			return fmt.Errorf("ledger: write %d balance events: %w", len(part), err)
		}
	}
	return nil
}

// maxOutboxInsert bounds one outbox INSERT (placeholders stay under 65,535).
const maxOutboxInsert = 2048

func (s *Store) eventsWritten() {
	if s.opts.Events.Written != nil {
		s.opts.Events.Written()
	}
}

// ExistingEvents returns the ledger rows (id, event_id, merchant_id, kind,
// amount, balance_after) of those eventIDs that have one: one prepared query
// per 1024 ids, the IN list padded to a power of two.
func (s *Store) ExistingEvents(ctx context.Context, eventIDs []string) (map[string]ledger.Row, error) {
	return s.existingEvents(ctx, prepared{stmts: s.stmts}, eventIDs)
}

// existingEvents is ExistingEvents on c (a transaction's prepared statements).
func (s *Store) existingEvents(ctx context.Context, c conn, eventIDs []string) (map[string]ledger.Row, error) {
	out := make(map[string]ledger.Row, len(eventIDs))
	for off := 0; off < len(eventIDs); off += maxInList {
		in, args := sqltx.InList(padPow2(eventIDs[off:min(off+maxInList, len(eventIDs))]))
		err := s.query(ctx, c,
			"SELECT id, event_id, merchant_id, kind, amount, balance_after FROM quota_ledger WHERE event_id IN ("+in+")",
			args, func(rows *sql.Rows) error {
				var r ledger.Row
				var kind string
				var after sql.NullInt64
				if err := rows.Scan(&r.ID, &r.EventID, &r.MerchantID, &kind, &r.Amount, &after); err != nil {
					return err
				}
				r.Kind = ledger.Kind(kind)
				if after.Valid {
					r.BalanceAfter = &after.Int64
				}
				out[r.EventID] = r
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("ledger: existing events: %w", err)
		}
	}
	return out, nil
}

// maxInList is the longest IN list of a prepared query.
const maxInList = 1024

// Balances returns the balance rows of those merchants that have one, in one
// query. A merchant missing from the map is unknown. The statement names
// itself (/* balances */) apart from the ledger transaction's read of the same
// rows: in processlists and slow logs, and for the fault suite, which holds
// MySQL at the read a hydration makes.
func (s *Store) Balances(ctx context.Context, merchantIDs []string) (map[string]ledger.Balance, error) {
	out := make(map[string]ledger.Balance, len(merchantIDs))
	if len(merchantIDs) == 0 {
		return out, nil
	}
	in, args := sqltx.InList(merchantIDs)
	err := s.query(ctx, s.db, "SELECT /* balances */ "+balanceColumns+" FROM merchant_balance WHERE merchant_id IN ("+in+")", args,
		func(rows *sql.Rows) error {
			b, err := scanBalance(rows)
			out[b.MerchantID] = b
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: balances: %w", err)
	}
	return out, nil
}

// conn is what a raw statement runs on: the pool, a transaction, or a
// prepared statement's own runner (prepared).
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	sqltx.Querier
}

// prepared runs a query as a prepared statement (see statements) on a
// transaction, or on the pool when tx is nil.
type prepared struct {
	stmts *statements
	tx    *sql.Tx
}

func (p prepared) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	st, err := p.stmts.get(ctx, query)
	if err != nil || p.tx == nil {
		return st, err
	}
	return p.tx.StmtContext(ctx, st), nil
}

func (p prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (p prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// exec runs a statement and returns the rows it affected.
func (s *Store) exec(ctx context.Context, c conn, query string, args []any) (int64, error) {
	start := time.Now()
	res, err := c.ExecContext(ctx, query, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	s.trace(ctx, start, query, n, err)
	return n, err
}

// query runs a query and calls scan for each row.
func (s *Store) query(ctx context.Context, c sqltx.Querier, query string, args []any, scan func(*sql.Rows) error) error {
	start := time.Now()
	n, err := sqltx.Each(ctx, c, query, args, scan)
	s.trace(ctx, start, query, n, err)
	return err
}

// trace shows a statement, with its placeholders only, to the Tracer.
func (s *Store) trace(ctx context.Context, start time.Time, query string, rows int64, err error) {
	if s.opts.Tracer != nil {
		s.opts.Tracer.Trace(ctx, start, func() (string, int64) { return query, rows }, err)
	}
}

const merchantRowsSQL = "SELECT " + rowColumns + " FROM quota_ledger WHERE merchant_id = ? AND seq > ? ORDER BY seq LIMIT ?"

// MerchantRows returns up to limit ledger rows of merchantID with seq above
// after, in seq (commit) order: one range of the index (merchant_id, seq), so
// a page costs the same wherever it starts, and a reader paging while rows
// commit never misses one (a row commits after every row with a lower seq).
// The rejections recorded while the merchant had no balance row have no seq
// and are not listed.
func (s *Store) MerchantRows(ctx context.Context, merchantID string, after int64, limit int) ([]ledger.Row, error) {
	var out []ledger.Row
	err := s.query(ctx, s.db, merchantRowsSQL,
		[]any{merchantID, after, limit}, func(rows *sql.Rows) error {
			var r ledger.Row
			err := scanRow(rows, &r)
			out = append(out, r)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: rows of %s: %w", merchantID, err)
	}
	return out, nil
}

// statements prepares each query once on the pool; database/sql then keeps
// one server-side statement per connection and reuses it in transactions.
// Prepared statements travel in the binary protocol: no SQL text for the
// server to parse per row and no client-side escaping, the two largest costs
// of a big multi-row INSERT. Only queries of a few fixed shapes belong here
// (see pow2Chunks): each one costs a statement on every connection.
type statements struct {
	db      *sql.DB
	mu      sync.Mutex
	byQuery map[string]*sql.Stmt
}

func newStatements(db *sql.DB) *statements {
	return &statements{db: db, byQuery: make(map[string]*sql.Stmt)}
}

func (s *statements) get(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.byQuery[query]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("ledger: prepare: %w", err)
	}
	s.byQuery[query] = st
	return st, nil
}

// Close closes every prepared statement.
func (s *statements) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for q, st := range s.byQuery {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(s.byQuery, q)
	}
	return first
}

// pow2Chunks splits n items into chunks whose sizes are powers of two of at
// most limit, largest first: at most log2(limit)+n/limit statement shapes
// exist, and a batch of n takes about popcount(n) statements.
func pow2Chunks(n, limit int) []int {
	limit = 1 << (bits.Len(uint(max(limit, 1))) - 1)
	var sizes []int
	for n > 0 {
		k := min(limit, 1<<(bits.Len(uint(n))-1))
		sizes = append(sizes, k)
		n -= k
	}
	return sizes
}

// padPow2 pads values with copies of its last element up to the next power
// of two (an IN list keeps its meaning), for a few query shapes.
func padPow2(values []string) []string {
	n := len(values)
	if n == 0 || n&(n-1) == 0 {
		return values
	}
	padded := make([]string, 1<<bits.Len(uint(n)), 1<<bits.Len(uint(n)))
	copy(padded, values)
	for i := n; i < len(padded); i++ {
		padded[i] = values[n-1]
	}
	return padded
}
