package deduct

import (
	"context"
)

// ExpireDue records the expiries due by MySQL's clock of up to limit
// merchants, under all their shard locks (see expire). It returns how many
// merchants it found due.
func (d *Deductor) ExpireDue(ctx context.Context, limit int) (int, error) {
	due, err := d.ledger.DueExpiries(ctx, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	tags, err := d.tagsOf(ctx, due)
	if err != nil {
		return 0, err
	}
	var n int
	err = d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		n, err = 0, d.expire(ctx, held, due)
		if err == nil {
			n = len(due)
		}
		return err
	})
	return n, err
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
