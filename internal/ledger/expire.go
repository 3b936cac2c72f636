package ledger

import "time"

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
