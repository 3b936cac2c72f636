package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// KindRefund is the kind of the ledger row of a refund: the quota a refunded
// payment gives back; it adds to credited.
const KindRefund Kind = "refund"

// The reasons of a refund (its row's reason).
const (
	ReasonRefund     = "refund"
	ReasonChargeback = "chargeback"
	ReasonCorrection = "correction"
)

// RefundRowID is the event id of a refund's ledger row: once per refund id, ever.
func RefundRowID(refundID string) string { return DerivedID("refund:", refundID) }

// Burn is what a recorded payment took from its merchant: its debit, the
// grants that paid it in burn-down order, and of the part no grant paid
// (owed) what was overage (Row.Overage).
type Burn struct {
	Amount  int64
	Parts   []Part // GrantID set, burn-down order
	Overage int64
}

// owed is the part of the debit no grant paid.
func (b Burn) owed() int64 {
	o := b.Amount
	for _, p := range b.Parts {
		o -= p.Amount
	}
	return max(o, 0)
}

// Refunded is what one refund of a payment does.
type Refunded struct {
	// Taken is how much of the payment's debit the refund uses up: the
	// amount, up to what earlier refunds left. Refunds of a payment add up
	// to at most its debit.
	Taken int64
	// Returned is what comes back, in the order given back (reverse
	// burn-down): to a grant, or (GrantID "") to the balance.
	Returned []Part
	// Expired is what would go back to grants that ended since (expired or
	// revoked): it stays gone.
	Expired int64
	// Billed is overage of the payment that the merchant no longer owes
	// (billed since): invoiced units, not quota, so nothing comes back.
	Billed int64
	// Beyond is the part of the amount over what the debit left: a conflict,
	// never a credit.
	Beyond int64
}

// Total is what the refund credits back: the sum of Returned.
func (r Refunded) Total() int64 {
	var n int64
	for _, p := range r.Returned {
		n += p.Amount
	}
	return n
}

// DecideRefund is the one rule of a refund of amount against a payment's
// burn, of which earlier refunds took already: the units come back in
// reverse burn-down order (the owed part first, its overage before any
// debt; then the grants, last burned first). Overage comes back only while
// the merchant still owes it (outstanding, max(0, -available) under the
// overage policy; 0 otherwise); units of a grant that has ended (ended)
// stay gone; a floor debt comes back to the balance. What the debit does not
// leave is Beyond.
func DecideRefund(b Burn, already, amount int64, outstanding int64, ended func(grantID string) bool) Refunded {
	left := max(0, b.Amount-already)
	out := Refunded{Taken: min(amount, left), Beyond: max(0, amount-left)}
	overage := min(b.Overage, b.owed())
	// The stack of what the payment took, top first.
	type piece struct {
		grant   string
		amount  int64
		overage bool
	}
	stack := []piece{{amount: overage, overage: true}, {amount: b.owed() - overage}}
	for _, p := range slices.Backward(b.Parts) {
		stack = append(stack, piece{grant: p.GrantID, amount: p.Amount})
	}
	skip, take := already, out.Taken
	for _, p := range stack {
		n := p.amount
		d := min(skip, n)
		skip, n = skip-d, n-d
		n = min(n, take)
		if n <= 0 {
			continue
		}
		take -= n
		switch {
		case p.overage:
			back := min(n, max(outstanding, 0))
			outstanding -= back
			out.Billed += n - back
			out.Returned = addPart(out.Returned, "", back)
		case p.grant == "":
			out.Returned = addPart(out.Returned, "", n)
		case ended(p.grant):
			out.Expired += n
		default:
			out.Returned = addPart(out.Returned, p.grant, n)
		}
	}
	return out
}

// addPart appends n units of grant to parts, merging with the last part of
// the same grant; nothing for n <= 0.
func addPart(parts []Part, grant string, n int64) []Part {
	if n <= 0 {
		return parts
	}
	if k := len(parts) - 1; k >= 0 && parts[k].GrantID == grant {
		parts[k].Amount += n
		return parts
	}
	return append(parts, Part{GrantID: grant, Amount: n})
}

// BookRefund books what a refund returns (r) onto its merchant's book, whose
// Grants hold the active grants and those r returns to (read with their
// state): each returned grant's remaining rises, by what is not spent on a
// floor debt first (PayBack), and it is active again. The rows are the
// refund row (from the template row: event id, merchant, reason, times) and,
// under the overage policy when the merchant is still below zero once the
// owed units are back and grant units come back too, a billed row (billed
// overage is never repaid, as for a grant) before a second refund row of the
// grant units (RefundGrantsRowID): each row keeps the shape of its kind.
// Owed units lifting the balance past zero (a debt a grant has repaid since)
// are adopted as an opening grant. A refund returning nothing books nothing:
// rows is the template with amount 0.
func BookRefund(bk *Book, r Refunded, row Row, now time.Time) []Row {
	row.Kind, row.Amount, row.GrantID = KindRefund, r.Total(), nil
	if row.Amount == 0 {
		return []Row{row}
	}
	avail := bk.Balance.Available()
	var owed, toGrants int64
	for _, p := range r.Returned {
		if p.GrantID == "" {
			owed += p.Amount
		} else {
			toGrants += p.Amount
		}
	}
	avail += owed
	var rows []Row
	if bk.Balance.PolicyKind == PolicyOverage && avail < 0 && toGrants > 0 {
		first, second := row, row
		first.Amount = owed
		second.EventID, second.Amount = RefundGrantsRowID(row.EventID), toGrants
		cause := row.EventID
		billed := Row{EventID: BilledID(row.EventID), MerchantID: row.MerchantID, Kind: KindBilled, Amount: -avail,
			Reason: ReasonOverage, Source: row.Source, GrantID: &cause, OccurredAt: row.OccurredAt, CreatedAt: row.CreatedAt}
		if owed > 0 {
			rows = append(rows, first)
		}
		rows = append(rows, billed)
		row = second
		avail = 0
	}
	for _, p := range r.Returned {
		if p.GrantID == "" {
			continue
		}
		i := slices.IndexFunc(bk.Grants, func(g Grant) bool { return g.ID == p.GrantID })
		if i < 0 {
			continue // not in the book: the caller read it as ended
		}
		g := &bk.Grants[i]
		g.Remaining = min(g.Amount, g.Remaining+PayBack(avail, p.Amount))
		g.State, g.EndedAt = GrantActive, nil
		avail += p.Amount
	}
	if g := grantsOf(r.Returned); len(g) == 1 && row.Amount == toGrants {
		row.GrantID = &g[0]
	}
	bk.Sort()
	bk.Adopt(avail, now)
	return append(rows, row)
}

// RefundGrantsRowID is the event id of the second refund row of a refund
// whose grant units came back after billed overage (see BookRefund).
func RefundGrantsRowID(refundRowID string) string { return DerivedID("refund-grants:", refundRowID) }

// grantsOf lists the grants parts name, once each.
func grantsOf(parts []Part) []string {
	var out []string
	for _, p := range parts {
		if p.GrantID != "" && !slices.Contains(out, p.GrantID) {
			out = append(out, p.GrantID)
		}
	}
	return out
}

// Refund is one refund to record: ID is the refund id, EventID the
// payment's; Reason is ReasonRefund, ReasonChargeback or ReasonCorrection.
type Refund struct {
	ID, EventID, MerchantID, Reason string
	Amount                          int64
	OccurredAt                      time.Time
}

// RefundState is the state of a quota_refunds row.
type RefundState string

// The states of a refund.
const (
	RefundPending   RefundState = "pending"   // its payment is not recorded yet: it waits
	RefundApplied   RefundState = "applied"   // applied to its payment (see Refunded)
	RefundVoid      RefundState = "void"      // its payment was rejected: nothing to give back
	RefundCancelled RefundState = "cancelled" // cancelled by an operator while pending
)

// RefundRecord is one quota_refunds row: a refund as recorded and what it did.
type RefundRecord struct {
	Refund
	State                                    RefundState
	Taken, Returned, Expired, Billed, Beyond int64
	Note                                     string
	CreatedAt                                time.Time
	SettledAt                                *time.Time
}

// RefundOutcome is what became of one Refund.
type RefundOutcome struct {
	Record    RefundRecord // as recorded, by this call or an earlier one
	Duplicate bool         // the id was recorded before (or earlier in the batch) with the same terms
	// Err wraps ErrConflict (the id is recorded with other terms, the payment
	// is of another merchant or no payment, or part of the amount is beyond
	// what the debit left: Record says what was applied), or is a
	// *RefusedError: nothing was written for it.
	Err error
}

// CheckRefund reports a refund the write path refuses, before anything is written.
func CheckRefund(r Refund) error {
	row := Row{EventID: RefundRowID(r.ID), MerchantID: r.MerchantID, Kind: KindRefund, Amount: r.Amount, Reason: r.Reason, OccurredAt: r.OccurredAt}
	if err := row.Check(); err != nil {
		return err
	}
	switch {
	case r.ID == "" || len(r.ID) > maxIDChars:
		return fmt.Errorf("refund_id must be 1..%d characters", maxIDChars)
	case r.EventID == "" || len(r.EventID) > maxIDChars:
		return fmt.Errorf("event_id must be 1..%d characters", maxIDChars)
	case r.Reason != ReasonRefund && r.Reason != ReasonChargeback && r.Reason != ReasonCorrection:
		return fmt.Errorf("reason %q is not refund, chargeback or correction", r.Reason)
	}
	return nil
}

// sameTerms says whether two records of one refund id are one refund.
func sameTerms(a, b Refund) bool {
	return a.EventID == b.EventID && a.MerchantID == b.MerchantID && a.Amount == b.Amount && a.Reason == b.Reason
}

// DecideRefunds sorts wanted refunds against those recorded before
// (existing, by refund id) and earlier in the batch: refused, a conflict, a
// duplicate, or fresh (the indexes of want to record, in order).
func DecideRefunds(want []Refund, existing map[string]RefundRecord) (out []RefundOutcome, fresh []int) {
	out = make([]RefundOutcome, len(want))
	first := make(map[string]Refund)
	for i, w := range want {
		out[i].Record = RefundRecord{Refund: w}
		if err := CheckRefund(w); err != nil {
			out[i].Err = &RefusedError{EventID: w.ID, Err: err}
			continue
		}
		prev, ok := existing[w.ID]
		if !ok {
			if f, seen := first[w.ID]; seen {
				prev, ok = RefundRecord{Refund: f}, true
			}
		}
		switch {
		case !ok:
			first[w.ID] = w
			fresh = append(fresh, i)
		case !sameTerms(prev.Refund, w):
			out[i].Record = prev
			out[i].Err = fmt.Errorf("%w: refund %s is recorded as %s of %d of payment %s for merchant %s (%s), not %s of %d of %s for %s",
				ErrConflict, w.ID, prev.Reason, prev.Amount, prev.EventID, prev.MerchantID, prev.State, w.Reason, w.Amount, w.EventID, w.MerchantID)
		default:
			out[i].Record = prev
			out[i].Duplicate = true
			if prev.State == RefundApplied && prev.Beyond > 0 {
				// Delivered again, it is the conflict it was: a crash between
				// its transaction and its dead-lettering loses no conflict.
				out[i].Err = BeyondError(prev.Refund, Refunded{Taken: prev.Taken, Beyond: prev.Beyond})
			}
		}
	}
	return out, fresh
}

// JudgePayment is what a refund of a recorded ledger row does: a debit of
// its merchant is refunded (ok); a rejected payment voids it (void, with the
// note to record); any other row, or a payment of another merchant, is a
// conflict (err).
func JudgePayment(r Refund, payment Row) (ok, void bool, note string, err error) {
	switch {
	case payment.MerchantID != r.MerchantID:
		return false, false, "", fmt.Errorf("%w: refund %s names payment %s of merchant %s, which is recorded for merchant %s",
			ErrConflict, r.ID, r.EventID, r.MerchantID, payment.MerchantID)
	case payment.Kind == KindRejected:
		return false, true, "payment rejected (" + payment.Reason + ")", nil
	case payment.Kind != KindDebit:
		return false, false, "", fmt.Errorf("%w: refund %s names event %s, which is recorded as %s, not a payment",
			ErrConflict, r.ID, r.EventID, payment.Kind)
	}
	return true, false, "", nil
}

// BeyondError is the conflict of a refund whose amount is more than what its
// payment's debit left: the part beyond is not credited.
func BeyondError(r Refund, d Refunded) error {
	return fmt.Errorf("%w: refund %s of %d exceeds what payment %s had left by %d: %d applied, %d not",
		ErrConflict, r.ID, r.Amount, r.EventID, d.Beyond, d.Taken, d.Beyond)
}

// MarshalJSON is the JSON of a refund wherever it is printed (billingctl
// payment refunds, the read API): snake_case, settled_at null until settled.
func (r RefundRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RefundID   string      `json:"refund_id"`
		EventID    string      `json:"event_id"`
		MerchantID string      `json:"merchant_id"`
		Amount     int64       `json:"amount"`
		Reason     string      `json:"reason"`
		OccurredAt time.Time   `json:"occurred_at"`
		State      RefundState `json:"state"`
		Taken      int64       `json:"taken"`
		Returned   int64       `json:"returned"`
		Expired    int64       `json:"expired"`
		Billed     int64       `json:"billed"`
		Beyond     int64       `json:"beyond"`
		Note       string      `json:"note"`
		CreatedAt  time.Time   `json:"created_at"`
		SettledAt  *time.Time  `json:"settled_at"`
	}{r.ID, r.EventID, r.MerchantID, r.Amount, r.Reason, r.OccurredAt.UTC(), r.State, r.Taken, r.Returned, r.Expired, r.Billed,
		r.Beyond, r.Note, r.CreatedAt.UTC(), r.SettledAt})
}
