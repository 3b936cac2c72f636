package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

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
