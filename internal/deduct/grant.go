package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
)

// GrantBatch credits each grant once per GrantID, creating merchants that are
// new: under the batch's merchant locks, one ledger.Grant transaction, then
// the quota hashes of the credited merchants are dropped (fenced, one
// pipeline) for the next deduction to hydrate. A drop, unlike an increment,
// is idempotent and exact after a crash; unconfirmed p: fields go with it,
// which is safe as MySQL does not count them either. It is the one grant path
// of billingctl and of the quota.grants topic.
//
// Per grant: Applied, or Duplicate when its id is recorded with the same
// merchant and amount (the drop is redone: it completes an interrupted
// grant); Invalid, Conflict or Refused with a permanent Err. A returned error
// concerns the whole batch: permanent (refused) or transient; granting the
// same batch again is safe.
func (d *Deductor) GrantBatch(ctx context.Context, grants []event.GrantCommand) ([]Result, error) {
	results := make([]Result, len(grants))
	credits := make([]ledger.Credit, 0, len(grants))
	at := make([]int, 0, len(grants)) // results[at[j]] is credits[j]'s
	merchants := make([]string, 0, len(grants))
	for i, g := range grants {
		if err := checkGrant(g, d.now()); err != nil {
			results[i] = Result{Outcome: Invalid, Err: failure.Permanent(failure.ClassInvalid, err)}
			continue
		}
		c := ledger.Credit{ID: g.GrantID, MerchantID: g.MerchantID, Amount: g.Amount, Source: g.Source,
			Priority: g.PriorityOr(), ExpiresAt: g.ExpiresAt, RolloverMax: g.RolloverMax}
		if g.StartsAt != nil {
			c.StartsAt = *g.StartsAt
		}
		credits = append(credits, c)
		at = append(at, i)
		merchants = append(merchants, g.MerchantID)
	}
	if len(credits) == 0 {
		return results, nil
	}
	// Every shard is dropped (both layouts while a resharding folds): the
	// next deduction rebalances them from MySQL.
	tags, err := d.tagsOf(ctx, merchants)
	if err != nil {
		return nil, err
	}
	err = d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		out, err := d.ledger.Grant(ctx, credits)
		switch {
		case errors.Is(err, ledger.ErrRefused):
			return failure.Permanent(failure.ClassRefused, err)
		case err != nil:
			return err
		}
		var credited []string
		for j, c := range out {
			results[at[j]] = grantResult(c)
			if c.Err == nil {
				credited = append(credited, c.Row.MerchantID)
			}
		}
		credited = slices.Compact(slices.Sorted(slices.Values(credited)))
		if err := d.drop(ctx, held, credited...); err != nil {
			return fmt.Errorf("deduct: %d grant(s) recorded but the quota caches not dropped; grant again: %w", len(credits), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// Grant is GrantBatch of one grant without a source: its outcome, Applied or
// Duplicate, or its error.
func (d *Deductor) Grant(ctx context.Context, merchantID string, amount int64, grantID string) (Outcome, error) {
	res, err := d.GrantBatch(ctx, []event.GrantCommand{{GrantID: grantID, MerchantID: merchantID, Amount: amount}})
	if err != nil {
		return "", err
	}
	return res[0].Outcome, res[0].Err
}

// checkGrant holds a grant to the limits of the write path.
func checkGrant(g event.GrantCommand, now time.Time) error {
	switch {
	case !event.ValidID(g.MerchantID):
		return fmt.Errorf("deduct: merchant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", g.MerchantID)
	case !event.ValidID(g.GrantID):
		return fmt.Errorf("deduct: grant id %q is not 1..64 characters of [A-Za-z0-9_.:-]", g.GrantID)
	case g.Amount < 1 || g.Amount > maxExact:
		return fmt.Errorf("deduct: grant amount %d is outside 1..2^53-1", g.Amount)
	case g.PriorityOr() < event.MinGrantPriority || g.PriorityOr() > event.MaxGrantPriority:
		return fmt.Errorf("deduct: grant priority %d is outside 0..100", g.PriorityOr())
	case g.RolloverMax < 0 || g.RolloverMax > maxExact:
		return fmt.Errorf("deduct: rollover_max %d is outside 0..2^53-1", g.RolloverMax)
	case g.RolloverMax > 0 && g.ExpiresAt == nil:
		return fmt.Errorf("deduct: grant %s never expires: it has nothing to roll over", g.GrantID)
	case g.ExpiresAt != nil && g.ExpiresAt.IsZero():
		return fmt.Errorf("deduct: grant %s expires at the zero time (nil: never)", g.GrantID)
	case g.StartsAt != nil && g.StartsAt.IsZero():
		return fmt.Errorf("deduct: grant %s starts at the zero time (nil: now)", g.GrantID)
	case g.ExpiresAt != nil && g.StartsAt != nil && !g.ExpiresAt.After(*g.StartsAt):
		return fmt.Errorf("deduct: grant %s expires before it starts", g.GrantID)
	case g.StartsAt != nil && g.StartsAt.After(now.Add(maxGrantLead)):
		// A grant is spendable from when it is recorded: one sent ahead of
		// its period would be spent early. Plans issue each period when due.
		return fmt.Errorf("deduct: grant %s starts at %s, in the future: send it when its period starts",
			g.GrantID, g.StartsAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// maxGrantLead is how far ahead of this clock a grant's starts_at may be
// (clock skew between the sender and the worker).
const maxGrantLead = time.Minute

// grantResult is the Result of one recorded (or refused) credit.
func grantResult(c ledger.Credited) Result {
	switch {
	case errors.Is(c.Err, ledger.ErrConflict):
		return Result{Outcome: Conflict, Err: failure.Permanent(failure.ClassConflict, c.Err)}
	case c.Err != nil:
		return Result{Outcome: Refused, Err: failure.Permanent(failure.ClassRefused, c.Err)}
	}
	r := Result{Outcome: Applied}
	if c.Duplicate {
		r.Outcome = Duplicate
	}
	if c.Row.BalanceAfter != nil { // always: a credit creates its balance row
		r.BalanceAfter = *c.Row.BalanceAfter
	}
	return r
}

// SetPolicy stores a merchant's overdraft policy under its lock and drops its
// quota hash: the next deduction hydrates the new floor with the balance.
// MySQL's guard enforces the policy from its commit on, whatever Redis holds.
func (d *Deductor) SetPolicy(ctx context.Context, merchantID string, p ledger.Policy) error {
	tags, err := d.tagsOf(ctx, []string{merchantID})
	if err != nil {
		return err
	}
	return d.locked(ctx, tags, func(ctx context.Context, held map[string]heldLock) error {
		if err := d.ledger.SetPolicy(ctx, merchantID, p); err != nil {
			return err
		}
		if err := d.drop(ctx, held, merchantID); err != nil {
			return fmt.Errorf("deduct: policy of %s is stored but the quota cache was not dropped; call again: %w", merchantID, err)
		}
		return nil
	})
}
