package deduct

import (
	"context"
	"errors"
	"fmt"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
)

// Grant credits amount to a merchant, once per grantID, creating the merchant
// if it is new. Under the merchant lock, one MySQL transaction writes a credit
// row and raises credited; then the merchant's quota hash is dropped (fenced)
// so that the next deduction hydrates it from MySQL.
//
// Dropping rather than adding amount to remain is deliberate: it is
// idempotent and always exact. An increment has to know whether it already
// happened (a crash between the commit and the increment, then a retry that
// finds the grant recorded, would either lose the credit or add it twice),
// while a dropped hash is rebuilt from credited - debited, which includes the
// grant exactly once. Unconfirmed p: fields go with it; that is safe because
// MySQL does not count them either, so their events, when redelivered, are
// deducted afresh. The price is one MySQL read on the next deduction.
//
// It returns Applied, or Duplicate when grantID was already recorded with the
// same merchant and amount (the hash is dropped again, which completes a grant
// interrupted before its drop). The same grantID with another merchant or
// amount is a permanent conflict. Any other error is transient: call again.
func (d *Deductor) Grant(ctx context.Context, merchantID string, amount int64, grantID string) (Outcome, error) {
	switch {
	case !event.ValidID(merchantID):
		return "", failure.Permanent(failure.ClassInvalid, fmt.Errorf("deduct: merchant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", merchantID))
	case !event.ValidID(grantID):
		return "", failure.Permanent(failure.ClassInvalid, fmt.Errorf("deduct: grant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", grantID))
	case amount < 1 || amount > maxExact:
		return "", failure.Permanent(failure.ClassInvalid, fmt.Errorf("deduct: grant amount %d is outside 1..2^53-1", amount))
	}
	dup := false
	err := d.locked(ctx, []string{merchantID}, func(ctx context.Context, held map[string]HeldLock) error {
		var err error
		_, dup, err = d.ledger.Grant(ctx, merchantID, amount, grantID)
		switch {
		case errors.Is(err, ledger.ErrConflict):
			return failure.Permanent(failure.ClassConflict, err)
		case errors.Is(err, ledger.ErrRefused):
			return failure.Permanent(failure.ClassRefused, err)
		case err != nil:
			return err
		}
		if err := d.drop(ctx, held[merchantID], merchantID); err != nil {
			return fmt.Errorf("deduct: grant %s is recorded but the quota cache was not dropped; call again: %w", grantID, err)
		}
		return nil
	})
	switch {
	case err != nil:
		return "", err
	case dup:
		return Duplicate, nil
	}
	return Applied, nil
}

// lockCause makes err say ErrLockLost when ctx ended because a lock was lost.
func lockCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrLockLost) && !errors.Is(err, ErrLockLost) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}
