package shard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/quotaflow/billing/internal/sqltx"
)

// Layout is a merchant's shard count, and the count of the layout a
// resharding has not folded into it yet (0 when none).
type Layout struct {
	Shards      int
	FoldingFrom int
}

// Tags lists the tags of every shard the layout may have in Redis: the
// current ones, then those of the layout being folded, each once.
func (l Layout) Tags(merchantID string) []string {
	tags := Tags(merchantID, l.Shards)
	if l.FoldingFrom > 0 && l.FoldingFrom != l.Shards {
		seen := make(map[string]bool, len(tags))
		for _, t := range tags {
			seen[t] = true
		}
		for _, t := range Tags(merchantID, l.FoldingFrom) {
			if !seen[t] {
				tags = append(tags, t)
			}
		}
	}
	return tags
}

// Sharded reports whether the layout has more than one shard, or is folding
// from one that had.
func (l Layout) Sharded() bool { return l.Shards > 1 || l.FoldingFrom > 1 }

// ErrResharding: a resharding of the merchant has not been folded yet.
var ErrResharding = errors.New("shard: a resharding of this merchant is not folded yet")

// Store reads and writes merchant_shards.
type Store struct{ db *sql.DB }

// NewStore returns a Store on db.
func NewStore(db *sql.DB) *Store { return &Store{db: db} }

// Layouts reads the layouts of merchants; a merchant without a row has one shard.
func (s *Store) Layouts(ctx context.Context, merchantIDs []string) (map[string]Layout, error) {
	out := make(map[string]Layout, len(merchantIDs))
	if len(merchantIDs) == 0 {
		return out, nil
	}
	in, args := sqltx.InList(merchantIDs)
	q := "SELECT merchant_id, shards, COALESCE(folding_from, 0) FROM merchant_shards WHERE merchant_id IN (" + in + ")"
	for _, m := range merchantIDs {
		out[m] = Layout{Shards: 1}
	}
	_, err := sqltx.Each(ctx, s.db, q, args, func(rows *sql.Rows) error {
		var m string
		var l Layout
		err := rows.Scan(&m, &l.Shards, &l.FoldingFrom)
		out[m] = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shard: read layouts: %w", err)
	}
	return out, nil
}

// Set makes n the merchant's shard count and remembers the current count as
// the layout to fold. It fails with ErrResharding while an earlier change is
// not folded (Folded), so two layouts at most are ever in Redis.
func (s *Store) Set(ctx context.Context, merchantID string, n int) (Layout, error) {
	if n < 1 || n > Max {
		return Layout{}, fmt.Errorf("shard: %d shards is outside 1..%d", n, Max)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO merchant_shards (merchant_id, shards, folding_from) VALUES (?, ?, 1)
		ON DUPLICATE KEY UPDATE folding_from = IF(folding_from IS NULL, shards, folding_from),
		shards = IF(folding_from = shards, VALUES(shards), shards)`, merchantID, n)
	if err != nil {
		return Layout{}, fmt.Errorf("shard: set %s to %d shards: %w", merchantID, n, err)
	}
	ls, err := s.Layouts(ctx, []string{merchantID})
	if err != nil {
		return Layout{}, err
	}
	l := ls[merchantID]
	if l.Shards != n {
		return l, fmt.Errorf("shard: set %s to %d shards: %w", merchantID, n, ErrResharding)
	}
	return l, nil
}

// Folded records that the layout l was folded: nothing of its previous layout
// is left in Redis. A changed layout is left alone.
func (s *Store) Folded(ctx context.Context, merchantID string, l Layout) error {
	if l.FoldingFrom == 0 {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `UPDATE merchant_shards SET folding_from = NULL
		WHERE merchant_id = ? AND shards = ? AND folding_from = ?`, merchantID, l.Shards, l.FoldingFrom)
	if err != nil {
		return fmt.Errorf("shard: mark %s folded: %w", merchantID, err)
	}
	return nil
}

// Sharded reads the shard count of every merchant with more than one shard.
func (s *Store) Sharded(ctx context.Context) (map[string]int, error) {
	out := make(map[string]int)
	_, err := sqltx.Each(ctx, s.db, "SELECT merchant_id, shards FROM merchant_shards WHERE shards > 1", nil, func(rows *sql.Rows) error {
		var m string
		var n int
		err := rows.Scan(&m, &n)
		out[m] = n
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shard: read sharded merchants: %w", err)
	}
	return out, nil
}
