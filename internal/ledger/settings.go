package ledger

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// ErrUnknownMerchant: the merchant has no merchant_balance row (grant first).
var ErrUnknownMerchant = errors.New("ledger: merchant unknown to billing (no merchant_balance row)")

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

// updateSettings runs one UPDATE of a merchant's balance row's settings
// (never its amounts); ErrUnknownMerchant when it has none.
func (s *Store) updateSettings(ctx context.Context, merchantID, set string, args ...any) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Raw("SELECT COUNT(*) FROM merchant_balance WHERE merchant_id = ? FOR UPDATE", merchantID).Scan(&n).Error; err != nil {
			return fmt.Errorf("ledger: read merchant %s: %w", merchantID, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s", ErrUnknownMerchant, merchantID)
		}
		if err := tx.Exec("UPDATE merchant_balance SET "+set+" WHERE merchant_id = ?", append(args, merchantID)...).Error; err != nil {
			if refused(err) {
				return &RefusedError{Err: err}
			}
			return fmt.Errorf("ledger: update merchant %s: %w", merchantID, err)
		}
		return nil
	})
}
