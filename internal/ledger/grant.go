package ledger

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

const upsertCreditSQL = "INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES (?, ?, 0) " +
	"ON DUPLICATE KEY UPDATE credited = credited + ?"

// Grant credits amount to a merchant once per grantID, in one transaction: a
// credit row (event_id = grantID) and credited += amount, creating the balance
// row if needed. It returns the row and whether it was already recorded; the
// same grantID with other content wraps ErrConflict. The caller holds the lock.
func (s *Store) Grant(ctx context.Context, merchantID string, amount int64, grantID string) (Row, bool, error) {
	row := Row{
		EventID: grantID, MerchantID: merchantID, Kind: KindCredit, Amount: amount,
		Reason: ReasonGrant, OccurredAt: s.now().UTC(),
	}
	if err := row.Check(); err != nil {
		return Row{}, false, &RefusedError{EventID: grantID, Err: err}
	}
	row.CreatedAt = row.OccurredAt
	// A concurrent insert of the id (not under our lock) fails the first attempt.
	for attempt := 0; ; attempt++ {
		var existing *Row
		r := []Row{row}
		err := s.inTx(ctx, func(tx *gorm.DB) error {
			existing = nil
			if err := s.assignIDs(r, []int{0}); err != nil {
				return err
			}
			var found []Row
			if err := tx.Where("event_id = ?", grantID).Limit(1).Find(&found).Error; err != nil {
				return fmt.Errorf("ledger: read grant: %w", err)
			}
			if len(found) == 1 {
				existing = &found[0]
				return nil
			}
			up := tx.Exec(upsertCreditSQL, merchantID, amount, amount)
			if up.Error != nil {
				return fmt.Errorf("ledger: credit merchant %s: %w", merchantID, up.Error)
			}
			var bal Balance
			if err := tx.Where("merchant_id = ?", merchantID).Take(&bal).Error; err != nil {
				return fmt.Errorf("ledger: read balance: %w", err)
			}
			after := bal.Available()
			r[0].BalanceAfter = &after
			if err := tx.Create(&r[0]).Error; err != nil {
				return err
			}
			// An upsert that inserted (1 row affected, 2 when it updated) created the merchant.
			return writeOutbox(s.grantEvents(r[0], bal, up.RowsAffected == 1), func(q string, args []any) error {
				return tx.Exec(q, args...).Error
			})
		})
		switch {
		case err == nil && existing != nil:
			if existing.Kind != KindCredit || existing.MerchantID != merchantID || existing.Amount != amount {
				return *existing, false, fmt.Errorf("%w: grant %s is recorded as %s of %d for merchant %s, not credit of %d for %s",
					ErrConflict, grantID, existing.Kind, existing.Amount, existing.MerchantID, amount, merchantID)
			}
			return *existing, true, nil
		case err == nil:
			s.eventsWritten()
			return r[0], false, nil
		case duplicate(err) && attempt == 0:
			continue
		case refused(err):
			return Row{}, false, &RefusedError{EventID: grantID, Err: err}
		}
		return Row{}, false, fmt.Errorf("ledger: grant %s: %w", grantID, err)
	}
}
