package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// row is one unsent outbox row.
type row struct {
	seq   int64
	event quotaevent.Event
}

// unsent reads up to limit unsent rows, in seq order.
func unsent(ctx context.Context, c *sql.Conn, limit int) ([]row, error) {
	rows, err := c.QueryContext(ctx, "SELECT seq, id, merchant_id, type, balance_before, balance_after, threshold, caused_by, occurred_at "+
		"FROM quota_outbox WHERE sent_at IS NULL ORDER BY seq LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: read unsent: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		var typ string
		var before, after, th sql.NullInt64
		e := &r.event
		if err := rows.Scan(&r.seq, &e.ID, &e.MerchantID, &typ, &before, &after, &th, &e.CausedBy, &e.OccurredAt); err != nil {
			return nil, fmt.Errorf("outbox: read unsent: %w", err)
		}
		e.Type, e.BalanceBefore, e.BalanceAfter = quotaevent.Type(typ), before.Int64, after.Int64
		if th.Valid {
			e.Threshold = &th.Int64
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read unsent: %w", err)
	}
	return out, nil
}

// markSent stamps rows as published.
func markSent(ctx context.Context, c *sql.Conn, rows []row, now time.Time) error {
	args := make([]any, 0, 1+len(rows))
	args = append(args, now)
	for _, r := range rows {
		args = append(args, r.seq)
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(rows)), ", ")
	if _, err := c.ExecContext(ctx, "UPDATE quota_outbox SET sent_at = ? WHERE seq IN ("+in+")", args...); err != nil {
		return fmt.Errorf("outbox: mark %d rows sent: %w", len(rows), err)
	}
	return nil
}

// pruneChunk bounds one DELETE, so it holds its locks briefly.
const pruneChunk = 5000

// prune deletes rows sent before cutoff, a chunk at a time.
func prune(ctx context.Context, c *sql.Conn, cutoff time.Time) (int64, error) {
	var total int64
	for {
		res, err := c.ExecContext(ctx, "DELETE FROM quota_outbox WHERE sent_at IS NOT NULL AND sent_at < ? ORDER BY sent_at LIMIT "+fmt.Sprint(pruneChunk), cutoff)
		if err != nil {
			return total, fmt.Errorf("outbox: prune: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}

// backlog counts the unsent rows and the time of the oldest.
func backlog(ctx context.Context, c *sql.Conn) (int64, time.Time, error) {
	var n int64
	var oldest sql.NullTime
	err := c.QueryRowContext(ctx, "SELECT COUNT(*), MIN(occurred_at) FROM quota_outbox WHERE sent_at IS NULL").Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox: count unsent: %w", err)
	}
	return n, oldest.Time, nil
}
