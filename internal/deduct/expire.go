package deduct

import (
	"context"
	"errors"
	"fmt"

	"github.com/quotaflow/billing/internal/ledger"
)

// ExpireDue records the expiries due by MySQL's clock of up to limit
// merchants, under all their shard locks (see expire). It returns how many
// merchants it found due. When the batch fails, each merchant is tried on its
// own, so that one whose expiry cannot be recorded holds up no other.
func (d *Deductor) ExpireDue(ctx context.Context, limit int) (int, error) {
	due, err := d.ledger.DueExpiries(ctx, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	if err := d.expireLocked(ctx, due); err == nil || ctx.Err() != nil || len(due) == 1 {
		return len(due), err
	}
	var errs []error
	for _, m := range due {
		if err := d.expireLocked(ctx, []string{m}); err != nil {
			errs = append(errs, fmt.Errorf("deduct: expiry of %s: %w", m, err))
		}
	}
	return len(due), errors.Join(errs...)
}

// expireLocked takes every shard lock of merchants and records the expiries
// of those still due: another expirer may have recorded them while this one
// waited for the locks, and their caches then stay.
func (d *Deductor) expireLocked(ctx context.Context, merchants []string) error {
	tags, err := d.tagsOf(ctx, merchants)
	if err != nil {
		return err
	}
	return d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		due, err := d.ledger.DueAmong(ctx, merchants)
		if err != nil || len(due) == 0 {
			return err
		}
		return d.expire(ctx, held, due)
	})
}

// expire drops the merchants' quota hashes (fenced), then records their due
// expiries (the ledger's Expire: exactly once per grant, whoever else runs
// it). In that order a crash leaves no hash holding what expired: the next
// deduction hydrates from MySQL, whose guard refuses debits while an expiry
// is due.
func (d *Deductor) expire(ctx context.Context, held map[string]heldLock, merchants []string) error {
	if err := d.drop(ctx, held, merchants...); err != nil {
		return err
	}
	_, err := d.ledger.Expire(ctx, merchants)
	return err
}

// Revoke ends grant id before its expiry, as an expiry would: under every
// shard lock of its merchant the quota hashes are dropped, then the ledger's
// Revoke records the remainder leaving (once ever). A grant of another
// merchant than merchant (when set) is unknown. Units of the grant that a
// pending deduction holds stay its: it commits against MySQL's balance,
// whose guard decides, as after an expiry. It returns the grant's merchant,
// the outcome and the amount revoked.
func (d *Deductor) Revoke(ctx context.Context, merchant, id string) (string, ledger.RevokeOutcome, int64, error) {
	owner, err := d.ledger.GrantMerchant(ctx, id)
	switch {
	case err != nil:
		return "", "", 0, err
	case merchant != "" && merchant != owner:
		return "", "", 0, fmt.Errorf("%s of merchant %s: %w", id, merchant, ledger.ErrUnknownGrant)
	}
	tags, err := d.tagsOf(ctx, []string{owner})
	if err != nil {
		return "", "", 0, err
	}
	var outcome ledger.RevokeOutcome
	var amount int64
	err = d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		if err := d.drop(ctx, held, owner); err != nil {
			return err
		}
		outcome, amount, err = d.ledger.Revoke(ctx, owner, id)
		return err
	})
	return owner, outcome, amount, err
}
