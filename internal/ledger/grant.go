package ledger

import (
	"fmt"
	"time"
)

// Credit is one grant to record: ID is the grant id, the row's event_id.
// Priority orders it in the burn-down (lower first; callers give
// DefaultPriority when they have none); ExpiresAt nil never expires;
// RolloverMax carries up to that much past its expiry. StartsAt, when set,
// is the start of the period it is for (a plan's); else the time it is recorded.
type Credit struct {
	ID, MerchantID, Source string
	Amount                 int64
	Priority               int
	ExpiresAt              *time.Time
	RolloverMax            int64
	StartsAt               time.Time
}

// Credited is what became of one Credit.
type Credited struct {
	Row       Row   // the credit row as recorded, by this call or an earlier one
	Duplicate bool  // the id was recorded before (or earlier in the batch) with the same merchant and amount
	Err       error // wraps ErrConflict, or a *RefusedError: nothing was written for it
}

// DecideCredits sorts the wanted credit rows against those recorded before
// (existing) and earlier in the batch: a refused value, a conflict, a
// duplicate, or fresh (returned, in order, to be written).
func DecideCredits(want []Row, existing map[string]Row) (out []Credited, fresh []Row) {
	out = make([]Credited, len(want))
	first := make(map[string]Row)
	for i, w := range want {
		out[i].Row = w
		if err := w.Check(); err != nil {
			out[i].Err = &RefusedError{EventID: w.EventID, Err: err}
			continue
		}
		prev, ok := existing[w.EventID]
		if !ok {
			prev, ok = first[w.EventID]
		}
		switch {
		case !ok:
			first[w.EventID] = w
			fresh = append(fresh, w)
		case prev.Kind != KindCredit || prev.MerchantID != w.MerchantID || prev.Amount != w.Amount:
			out[i].Row = prev
			out[i].Err = fmt.Errorf("%w: grant %s is recorded as %s of %d for merchant %s, not credit of %d for %s",
				ErrConflict, w.EventID, prev.Kind, prev.Amount, prev.MerchantID, w.Amount, w.MerchantID)
		default:
			out[i].Row = prev
			out[i].Duplicate = true
		}
	}
	return out, fresh
}

// Billed is the billed row that ends the billed overage of b's merchant
// (b after its credits, which took taken) when it is below zero under the
// overage policy, keyed by its first credit: it brings the balance back to
// zero before the credits, so that they are not spent on units that are
// billed; it adds to credited. ok false: nothing is billed.
func Billed(b Balance, taken int64, first Row) (Row, bool) {
	owed := -(b.Available() + taken)
	if b.PolicyKind != PolicyOverage || owed <= 0 {
		return Row{}, false
	}
	grant := first.EventID
	return Row{EventID: BilledID(grant), MerchantID: b.MerchantID, Kind: KindBilled, Amount: owed,
		Reason: ReasonOverage, Source: first.Source, GrantID: &grant, OccurredAt: first.OccurredAt, CreatedAt: first.CreatedAt}, true
}

// BookCredits records credit rows as grants in the merchants' books (terms
// by id): each pays back what the merchant owes first (PayBack; a billed row
// before them has taken billed overage off). The books' balances are after
// the rows, which took taken.
func BookCredits(books map[string]*Book, rows []Row, taken map[string]int64, terms map[string]Credit) {
	avail := make(map[string]int64, len(books))
	for m, bk := range books {
		avail[m] = bk.Balance.Available() + taken[m]
		bk.Adopt(avail[m], rows[0].CreatedAt)
	}
	for _, r := range rows {
		bk, ok := books[r.MerchantID]
		if !ok {
			continue
		}
		if r.Kind == KindBilled {
			avail[r.MerchantID] += r.Amount
			continue
		}
		c := terms[r.EventID]
		g := Grant{ID: r.EventID, MerchantID: r.MerchantID, Amount: r.Amount, Remaining: PayBack(avail[r.MerchantID], r.Amount),
			Priority: c.Priority, StartsAt: c.StartsAt, ExpiresAt: c.ExpiresAt, RolloverMax: c.RolloverMax,
			State: GrantActive, CreatedAt: r.CreatedAt}
		if g.StartsAt.IsZero() {
			g.StartsAt = r.CreatedAt
		}
		avail[r.MerchantID] += r.Amount
		bk.Add(g)
	}
}
