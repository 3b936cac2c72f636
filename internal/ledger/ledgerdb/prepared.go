package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"sync"
)

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
