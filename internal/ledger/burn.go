package ledger

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"
)

// GrantState is the state of a quota_grants row.
type GrantState string

// The states of a grant: active until used up or expired.
const (
	GrantActive  GrantState = "active"
	GrantUsed    GrantState = "used"
	GrantExpired GrantState = "expired"
)

// DefaultPriority is the burn-down priority of a grant without one (lower
// burns first).
const DefaultPriority = 50

// Grant is one quota_grants row. Remaining is the true remainder (for the
// head grant: head_end - debited, see RemainingSQL).
type Grant struct {
	ID, MerchantID string
	Amount         int64
	Remaining      int64
	Priority       int
	StartsAt       time.Time
	ExpiresAt      *time.Time // nil: never expires
	RolloverMax    int64
	State          GrantState
	CreatedAt      time.Time
	EndedAt        *time.Time
}

// MarshalJSON is the JSON of a grant wherever it is printed (billingctl quota
// show, the read API): snake_case, expires_at and ended_at null when unset.
func (g Grant) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		GrantID     string     `json:"grant_id"`
		Amount      int64      `json:"amount"`
		Remaining   int64      `json:"remaining"`
		Priority    int        `json:"priority"`
		StartsAt    time.Time  `json:"starts_at"`
		ExpiresAt   *time.Time `json:"expires_at"`
		RolloverMax int64      `json:"rollover_max"`
		State       GrantState `json:"state"`
		CreatedAt   time.Time  `json:"created_at"`
		EndedAt     *time.Time `json:"ended_at"`
	}{g.ID, g.Amount, g.Remaining, g.Priority, g.StartsAt.UTC(), g.ExpiresAt, g.RolloverMax, g.State, g.CreatedAt.UTC(), g.EndedAt})
}

// BurnOrder orders grants as debits use them: priority ascending, then the
// earliest expiry (never-expiring last), then the oldest, then by id.
func BurnOrder(a, b Grant) int {
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	switch {
	case a.ExpiresAt == nil && b.ExpiresAt != nil:
		return 1
	case a.ExpiresAt != nil && b.ExpiresAt == nil:
		return -1
	case a.ExpiresAt != nil:
		if c := a.ExpiresAt.Compare(*b.ExpiresAt); c != 0 {
			return c
		}
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Part is what one grant paid of a debit; an empty GrantID is the part no
// grant paid (owed, under an overdraft policy).
type Part struct {
	GrantID string
	Amount  int64
}

// Attribute pays debits, in order, from grants in burn-down order (sorting
// grants in place and lowering their Remaining): the parts of each debit,
// the owed part last. A grant used up stays in grants with Remaining 0.
func Attribute(grants []Grant, debits []int64) [][]Part {
	slices.SortFunc(grants, BurnOrder)
	out := make([][]Part, len(debits))
	g := 0
	for i, d := range debits {
		for d > 0 {
			for g < len(grants) && grants[g].Remaining == 0 {
				g++
			}
			if g == len(grants) {
				out[i] = append(out[i], Part{Amount: d})
				break
			}
			take := min(d, grants[g].Remaining)
			grants[g].Remaining -= take
			out[i] = append(out[i], Part{GrantID: grants[g].ID, Amount: take})
			d -= take
		}
	}
	return out
}

// PayBack is what remains of a grant of amount to a merchant whose balance
// before it is available: a negative balance (debits owed under an overdraft
// policy) is paid back first. So the active grants' remaining always sums to
// max(available, 0).
func PayBack(available, amount int64) int64 {
	return max(0, amount+min(0, available))
}

// Unbacked is the part of a non-negative balance that no grant backs (a
// balance row written by hand, without grants): adopted as an opening grant.
func Unbacked(available int64, grants []Grant) int64 {
	var sum int64
	for _, g := range grants {
		sum += g.Remaining
	}
	return max(0, available) - sum
}

// Head is the first grant in burn-down order with a remainder, and the
// earliest expiry among the grants with one; ok false when none has any.
// grants must be sorted (BurnOrder).
func Head(grants []Grant) (head Grant, nextExpiry *time.Time, ok bool) {
	for _, g := range grants {
		if g.Remaining == 0 {
			continue
		}
		if !ok {
			head, ok = g, true
		}
		if g.ExpiresAt != nil && (nextExpiry == nil || g.ExpiresAt.Before(*nextExpiry)) {
			nextExpiry = g.ExpiresAt
		}
	}
	return head, nextExpiry, ok
}

// Rollover is the grant that carries up to g.RolloverMax of its remainder
// past its expiry: same priority, starting at g's expiry and lasting as long
// as g did, carried once (no rollover of its own). ok false: nothing to carry.
func Rollover(g Grant) (Grant, bool) {
	carry := min(g.Remaining, g.RolloverMax)
	if carry <= 0 || g.ExpiresAt == nil {
		return Grant{}, false
	}
	end := g.ExpiresAt.Add(g.ExpiresAt.Sub(g.StartsAt))
	return Grant{ID: DerivedID("rollover:", g.ID), MerchantID: g.MerchantID, Amount: carry, Remaining: carry,
		Priority: g.Priority, StartsAt: *g.ExpiresAt, ExpiresAt: &end, State: GrantActive}, true
}

// DerivedID is the id of a row derived from id (an expiry, a rollover): prefix
// + id, or prefix + a hash of id when that would not fit an event id. The
// same id always derives the same: a replay finds the row it wrote.
func DerivedID(prefix, id string) string {
	if len(prefix)+len(id) <= maxIDChars {
		return prefix + id
	}
	sum := sha256.Sum256([]byte(id))
	return prefix + hex.EncodeToString(sum[:])[:maxIDChars-len(prefix)]
}

// ExpireID is the event id of the expire row of a grant: once per grant, ever.
func ExpireID(grantID string) string { return DerivedID("expire:", grantID) }

// RevokeID is the event id of the row that revokes a grant: once per grant, ever.
func RevokeID(grantID string) string { return DerivedID("revoke:", grantID) }

// BilledID is the event id of the billed row that a grant's arrival wrote:
// once per grant, ever.
func BilledID(grantID string) string { return DerivedID("billed:", grantID) }
