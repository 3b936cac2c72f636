package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// SetAlerts stores a merchant's low-balance thresholds; nil returns it to the
// default (Events.DefaultAlerts). The next transaction that moves its
// balance uses them.
func (s *Store) SetAlerts(ctx context.Context, merchantID string, a *quotaevent.Alerts) error {
	var units, percent any // NULL: the default
	if a != nil {
		if a.Units < 0 || a.Percent < 0 || a.Percent > quotaevent.MaxPercent {
			return fmt.Errorf("ledger: thresholds %+v out of range", *a)
		}
		units, percent = a.Units, a.Percent
	}
	return s.updateSettings(ctx, merchantID, "low_units = ?, low_percent = ?", units, percent)
}

// SetPolicy stores a merchant's overdraft policy. The caller holds the
// merchant lock and drops its quota hash afterwards (the hash keeps the floor).
func (s *Store) SetPolicy(ctx context.Context, merchantID string, p ledger.Policy) error {
	switch {
	case p.Kind == ledger.PolicyFloor && p.Floor <= 0:
		return fmt.Errorf("ledger: floor %d must be positive", p.Floor)
	case p.Kind != ledger.PolicyFloor && p.Kind != ledger.PolicyReject && p.Kind != ledger.PolicyOverage:
		return fmt.Errorf("ledger: unknown policy %q", p.Kind)
	case p.Kind != ledger.PolicyFloor:
		p.Floor = 0
	}
	return s.updateSettings(ctx, merchantID, "overdraft_policy = ?, overdraft_floor = ?", string(p.Kind), p.Floor)
}

// updateSettings runs one UPDATE of a merchant's balance row's settings
// (never its amounts); ErrUnknownMerchant when it has none.
func (s *Store) updateSettings(ctx context.Context, merchantID, set string, args ...any) error {
	return s.inTx(ctx, nil, func(ctx context.Context, tx *sql.Tx) error {
		var n int64
		if err := s.query(ctx, tx, "SELECT COUNT(*) FROM merchant_balance WHERE merchant_id = ? FOR UPDATE", []any{merchantID},
			func(rows *sql.Rows) error { return rows.Scan(&n) }); err != nil {
			return fmt.Errorf("ledger: read merchant %s: %w", merchantID, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s", ledger.ErrUnknownMerchant, merchantID)
		}
		if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET "+set+" WHERE merchant_id = ?", append(args, merchantID)); err != nil {
			if refused(err) {
				return &ledger.RefusedError{Err: err}
			}
			return fmt.Errorf("ledger: update merchant %s: %w", merchantID, err)
		}
		return nil
	})
}
