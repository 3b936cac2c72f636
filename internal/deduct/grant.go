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
// if it is new: under the merchant lock, ledger.Grant, then the quota hash is
// dropped (fenced) for the next deduction to hydrate. A drop, unlike an
// increment, is idempotent and exact after a crash; unconfirmed p: fields go
// with it, which is safe as MySQL does not count them either.
//
// It returns Applied, or Duplicate when grantID is recorded with the same
// merchant and amount (dropping again completes an interrupted grant). Another
// merchant or amount is a permanent conflict; other errors are transient.
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
	// Every shard is dropped (both layouts while a resharding folds): the
	// next deduction rebalances them from MySQL.
	layouts, err := d.shards.Layouts(ctx, []string{merchantID})
	if err != nil {
		return "", err
	}
	err = d.locked(ctx, layouts[merchantID].Tags(merchantID), func(ctx context.Context, held map[string]heldLock) error {
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
		if err := d.dropMerchant(ctx, held, merchantID); err != nil {
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
