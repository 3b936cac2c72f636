package deduct

import (
	"context"
	"errors"
	"fmt"
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
