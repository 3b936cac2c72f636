package plan

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// Store reads and writes merchant_plans.
type Store struct{ db *sql.DB }

// NewStore is a Store on db.
func NewStore(db *sql.DB) *Store { return &Store{db: db} }

const columns = "merchant_id, amount, every_months, every_secs, rollover_max, priority, anchor, next_start"

// Set creates or replaces a merchant's plan; its first period to issue is
// the one containing the anchor (so a plan anchored in the past starts with
// the current period). A plan replaced after its current period was issued
// takes effect from its next period: that period keeps its grant. A merchant
// unknown to billing gets no plan (ledger.ErrUnknownMerchant): its grants would
// make it known. Merchants are never removed, so a check before the write holds.
func (s *Store) Set(ctx context.Context, p Plan) error {
	if err := p.Check(); err != nil {
		return err
	}
	if err := s.known(ctx, p.MerchantID); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, "INSERT INTO merchant_plans ("+columns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE amount = VALUES(amount), every_months = VALUES(every_months), every_secs = VALUES(every_secs),"+
		" rollover_max = VALUES(rollover_max), priority = VALUES(priority), anchor = VALUES(anchor), next_start = GREATEST(next_start, VALUES(next_start))",
		p.MerchantID, p.Amount, p.Every.Months, int64(p.Every.Duration/time.Second), p.RolloverMax, p.Priority, p.Anchor.UTC(), p.Anchor.UTC())
	if err != nil {
		return fmt.Errorf("plan: set %s: %w", p.MerchantID, err)
	}
	return nil
}

// Cancel ends a merchant's plan: no period after the current one is issued
// (the current one keeps its grant until it expires). It reports whether there
// was a plan; ledger.ErrUnknownMerchant for a merchant unknown to billing.
func (s *Store) Cancel(ctx context.Context, merchantID string) (bool, error) {
	if err := s.known(ctx, merchantID); err != nil {
		return false, err
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM merchant_plans WHERE merchant_id = ?", merchantID)
	if err != nil {
		return false, fmt.Errorf("plan: cancel %s: %w", merchantID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *Store) known(ctx context.Context, merchantID string) error {
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT 1 FROM merchant_balance WHERE merchant_id = ?", merchantID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("plan: %s: %w", merchantID, ledger.ErrUnknownMerchant)
	case err != nil:
		return fmt.Errorf("plan: merchant %s: %w", merchantID, err)
	}
	return nil
}

// Get is a merchant's plan; ok false when it has none.
func (s *Store) Get(ctx context.Context, merchantID string) (p Plan, ok bool, err error) {
	ps, err := s.query(ctx, "plan: get "+merchantID, "SELECT "+columns+" FROM merchant_plans WHERE merchant_id = ?", merchantID)
	if err != nil || len(ps) == 0 {
		return p, false, err
	}
	return ps[0], true, nil
}

// List is every plan, by merchant.
func (s *Store) List(ctx context.Context) ([]Plan, error) {
	return s.query(ctx, "plan: list", "SELECT "+columns+" FROM merchant_plans ORDER BY merchant_id")
}

// Due lists up to limit plans whose next period has started by MySQL's
// clock, and that clock's now.
func (s *Store) Due(ctx context.Context, limit int) ([]Plan, time.Time, error) {
	var now time.Time
	if err := s.db.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&now); err != nil {
		return nil, now, fmt.Errorf("plan: now: %w", err)
	}
	out, err := s.query(ctx, "plan: due", "SELECT "+columns+" FROM merchant_plans WHERE next_start <= ? ORDER BY next_start LIMIT ?", now, limit)
	return out, now.UTC(), err
}

// UntilNextPeriod is how long until the earliest next period of any plan
// by MySQL's clock (negative: one is due); false when there is no plan.
func (s *Store) UntilNextPeriod(ctx context.Context) (time.Duration, bool, error) {
	d, ok, err := sqltx.Until(ctx, s.db, "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(next_start)) FROM merchant_plans")
	if err != nil {
		return 0, false, fmt.Errorf("plan: next period: %w", err)
	}
	return d, ok, nil
}

// query reads the plans a SELECT of columns returns; what names it in errors.
func (s *Store) query(ctx context.Context, what, q string, args ...any) ([]Plan, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []Plan
	for rows.Next() {
		p, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Advance moves a plan's next period from from to to, unless another
// scheduler (or a Set) moved it first.
func (s *Store) Advance(ctx context.Context, merchantID string, from, to time.Time) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE merchant_plans SET next_start = ? WHERE merchant_id = ? AND next_start = ?",
		to.UTC(), merchantID, from.UTC()); err != nil {
		return fmt.Errorf("plan: advance %s: %w", merchantID, err)
	}
	return nil
}

func scan(rows *sql.Rows) (Plan, error) {
	var p Plan
	var secs int64
	if err := rows.Scan(&p.MerchantID, &p.Amount, &p.Every.Months, &secs, &p.RolloverMax, &p.Priority, &p.Anchor, &p.NextStart); err != nil {
		return p, fmt.Errorf("plan: read: %w", err)
	}
	p.Every.Duration = time.Duration(secs) * time.Second
	p.Anchor, p.NextStart = p.Anchor.UTC(), p.NextStart.UTC()
	return p, nil
}
