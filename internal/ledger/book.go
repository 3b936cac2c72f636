package ledger

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Book is one merchant's active grants inside a ledger transaction: read by
// the store, changed by the decisions, written back by the store (Changes).
type Book struct {
	Balance Balance
	Grants  []Grant          // active, with true remaining, in burn-down order
	stored  map[string]Grant // as read, to write back only what changed
	ended   []Grant          // left the active set in this transaction
}

// NewBook starts the book of b's merchant; Read fills it.
func NewBook(b Balance) *Book { return &Book{Balance: b, stored: map[string]Grant{}} }

// Read puts a grant as stored in the book; before is the merchant's debited
// at which head_end was last set. The head's remaining column is stale (its
// remaining lives in head_end): the true value differs from the stored one
// and is written back when the head moves on. Sort the book after reading.
func (bk *Book) Read(g Grant, before int64) {
	bk.stored[g.ID] = g
	if b := bk.Balance; b.HeadGrant != nil && *b.HeadGrant == g.ID && b.HeadEnd != nil {
		g.Remaining = max(0, *b.HeadEnd-before)
	}
	bk.Grants = append(bk.Grants, g)
}

// Sort puts the grants in burn-down order.
func (bk *Book) Sort() { slices.SortFunc(bk.Grants, BurnOrder) }

// Add puts a new grant in the book.
func (bk *Book) Add(g Grant) {
	bk.Grants = append(bk.Grants, g)
	bk.Sort()
}

// Adopt backs a non-negative balance that no grant backs (a balance row
// written by hand) with a never-expiring opening grant. available is the
// balance the grants stand for.
func (bk *Book) Adopt(available int64, now time.Time) {
	if u := Unbacked(available, bk.Grants); u > 0 {
		id := DerivedID("opening:", bk.Balance.MerchantID+"@"+strconv.FormatInt(bk.Balance.Debited, 10))
		bk.Add(Grant{ID: id, MerchantID: bk.Balance.MerchantID, Amount: u, Remaining: u, Priority: DefaultPriority,
			StartsAt: now, State: GrantActive, CreatedAt: now})
	}
}

// Changes ends the grants used up by now, keeps only the active ones, and
// returns the grants to write back: new, or changed since read.
func (bk *Book) Changes(now time.Time) []Grant {
	var changed, active []Grant
	for _, g := range bk.Grants {
		if g.Remaining == 0 && g.State == GrantActive {
			g.State, g.EndedAt = GrantUsed, &now
		}
		if g.State == GrantActive {
			active = append(active, g)
		}
		changed = append(changed, g)
	}
	changed = append(changed, bk.ended...)
	bk.Grants = active
	return slices.DeleteFunc(changed, func(g Grant) bool {
		old, ok := bk.stored[g.ID]
		return ok && old.Remaining == g.Remaining && old.State == g.State
	})
}

// NoHead is head_end when no grant has a remainder: every debit is owed
// until a grant arrives (and moves the head).
const NoHead = math.MaxInt64

// HeadEnd is where the head of bk moves after the transaction, debited being
// the merchant's debited then: its grant (nil: none) and the debited at which
// it is used up, and the earliest expiry with a remainder (nil: none).
func (bk *Book) HeadEnd(debited int64) (grant *string, end int64, nextExpiry *time.Time) {
	head, next, ok := Head(bk.Grants)
	if !ok {
		return nil, NoHead, next
	}
	return &head.ID, debited + head.Remaining, next
}

// PaidByHead says whether the debits of a batch that took b.Debited where it
// is were wholly paid by the head grant (or wholly owed with no grant left):
// the hot path, where no grant row is read or written.
func PaidByHead(b Balance) bool {
	return b.HeadEnd != nil && b.Debited <= *b.HeadEnd
}

// ByHead names the head grant on every debit of rows whose merchant's head
// paid the whole batch (PaidByHead), clears it on the others, and returns the
// balances (after the batch, which took debits) of the merchants whose
// grants must be read to attribute their debits (PayDebits).
func ByHead(rows []Row, bals []Balance, debits map[string]int64) (slow []Balance) {
	heads := make(map[string]*string, len(bals))
	for _, b := range bals {
		if debits[b.MerchantID] <= 0 {
			continue
		}
		if PaidByHead(b) {
			heads[b.MerchantID] = b.HeadGrant
		} else {
			slow = append(slow, b)
		}
	}
	for i := range rows {
		rows[i].GrantID = nil
		if rows[i].Kind == KindDebit {
			rows[i].GrantID = heads[rows[i].MerchantID]
		}
	}
	return slow
}

// Attribution is what one grant paid of a debit that several grants paid,
// or that was partly owed: a quota_attribution row.
type Attribution struct {
	EventID string
	Part
}

// PayDebits pays the debits of rows whose merchant has a book, in row order
// and burn-down order (Attribute), after adopting what no grant backs of the
// balance before them (debits: each merchant's total). A debit one grant
// paid whole names it; the parts of the others are returned.
func PayDebits(rows []Row, books map[string]*Book, debits map[string]int64, now time.Time) []Attribution {
	amounts := make(map[string][]int64, len(books))
	at := make(map[string][]int, len(books))
	for i, r := range rows {
		if _, ok := books[r.MerchantID]; ok && r.Kind == KindDebit {
			amounts[r.MerchantID] = append(amounts[r.MerchantID], r.Amount)
			at[r.MerchantID] = append(at[r.MerchantID], i)
		}
	}
	var split []Attribution
	for m, bk := range books {
		bk.Adopt(bk.Balance.Available()+debits[m], now)
		for k, parts := range Attribute(bk.Grants, amounts[m]) {
			i := at[m][k]
			if len(parts) == 1 && parts[0].GrantID != "" {
				rows[i].GrantID = &parts[0].GrantID
				continue
			}
			for _, p := range parts {
				if p.GrantID != "" {
					split = append(split, Attribution{EventID: rows[i].EventID, Part: p})
				}
			}
		}
	}
	return split
}
