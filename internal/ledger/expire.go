package ledger

import (
	"slices"
	"time"
)

// Expire ends the grants of bk that expired by now, adds their rollovers,
// and returns the rows that record it (ExpiryRows): the ended grants keep
// nothing.
func (bk *Book) Expire(now time.Time) []Row {
	active, ended, rollovers := ExpireDue(bk.Grants, now)
	bk.Grants, bk.ended = active, ended
	for _, g := range rollovers {
		bk.Add(g)
	}
	rows := ExpiryRows(ended, rollovers, now)
	for i := range bk.ended {
		bk.ended[i].Remaining = 0
	}
	return rows
}

// ExpirySums adds up what expiry rows take (expire rows) and give (rollovers).
func ExpirySums(rows []Row) (taken, credited int64) {
	for _, r := range rows {
		if r.Kind == KindExpire {
			taken += r.Amount
		} else {
			credited += r.Amount
		}
	}
	return taken, credited
}

// ExpireDue splits active grants at now: those still active, those that
// expired (Remaining as it was, State expired), and the rollover grants of
// the expired ones.
func ExpireDue(grants []Grant, now time.Time) (active, ended, rollovers []Grant) {
	for _, g := range grants {
		if g.ExpiresAt == nil || g.ExpiresAt.After(now) {
			active = append(active, g)
			continue
		}
		if r, ok := Rollover(g); ok {
			r.CreatedAt = now
			rollovers = append(rollovers, r)
		}
		g.State, g.EndedAt = GrantExpired, &now
		ended = append(ended, g)
	}
	return active, ended, rollovers
}

// ExpiryRows are the ledger rows of expired grants (one expire row per grant
// with a remainder) and of their rollovers (a credit each), in that order.
func ExpiryRows(ended, rollovers []Grant, now time.Time) []Row {
	var rows []Row
	for _, g := range ended {
		if g.Remaining == 0 {
			continue
		}
		id := g.ID
		rows = append(rows, Row{EventID: ExpireID(g.ID), MerchantID: g.MerchantID, Kind: KindExpire, Amount: g.Remaining,
			Reason: ReasonExpiry, GrantID: &id, OccurredAt: *g.ExpiresAt, CreatedAt: now})
	}
	for _, g := range rollovers {
		id := g.ID
		rows = append(rows, Row{EventID: g.ID, MerchantID: g.MerchantID, Kind: KindCredit, Amount: g.Amount,
			Reason: ReasonRollover, GrantID: &id, OccurredAt: g.StartsAt, CreatedAt: now})
	}
	return rows
}

// RevokeOutcome is what a revoke of a grant did.
type RevokeOutcome string

// The outcomes of a revoke.
const (
	Revoked        RevokeOutcome = "revoked"
	AlreadyRevoked RevokeOutcome = "already_revoked" // by an earlier revoke: nothing written
	NothingLeft    RevokeOutcome = "nothing_left"    // expired or used up: nothing written
)

// Revoke ends active grant id of bk now, before its expiry: its remainder
// leaves through one expire row (reason revoked, keyed by RevokeID) and
// rolls nothing over; the grant is expired with nothing left, so that,
// like an expired one, it has one ending row ever. A grant not active in bk
// (ended) or used up writes nothing: ok false. Call Expire first: a due
// expiry is recorded as one.
func (bk *Book) Revoke(id string, now time.Time) (Row, bool) {
	i := slices.IndexFunc(bk.Grants, func(g Grant) bool { return g.ID == id })
	if i < 0 || bk.Grants[i].Remaining == 0 {
		return Row{}, false
	}
	g := bk.Grants[i]
	bk.Grants = slices.Delete(bk.Grants, i, i+1)
	row := Row{EventID: RevokeID(id), MerchantID: g.MerchantID, Kind: KindExpire, Amount: g.Remaining,
		Reason: ReasonRevoked, GrantID: &id, OccurredAt: now, CreatedAt: now}
	g.State, g.Remaining, g.EndedAt = GrantExpired, 0, &now
	bk.ended = append(bk.ended, g)
	return row, true
}
