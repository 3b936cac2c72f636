package ledger

import (
	"sort"
	"strconv"
)

// TakenTotals sums what rows take from each merchant's balance (debits and
// expiries add, credits and billed rows subtract) and lists every merchant of
// rows, sorted.
func TakenTotals(rows []Row) (map[string]int64, []string) {
	totals := make(map[string]int64)
	for _, r := range rows {
		if sign, _ := r.Kind.Movement(); sign != 0 {
			totals[r.MerchantID] -= sign * r.Amount
		} else if _, seen := totals[r.MerchantID]; !seen {
			totals[r.MerchantID] = 0
		}
	}
	merchants := make([]string, 0, len(totals))
	for m := range totals {
		merchants = append(merchants, m)
	}
	sort.Strings(merchants)
	return totals, merchants
}

// RowCounts counts rows per merchant: how many seq numbers each takes.
func RowCounts(rows []Row) map[string]int64 {
	n := make(map[string]int64)
	for _, r := range rows {
		n[r.MerchantID]++
	}
	return n
}

// Sequence walks rows in order from each merchant's balance before the batch
// and sets each row's Seq and BalanceAfter, and a debit's overage (the part
// below zero, under the overage policy). bals are the balances after the
// batch, which took taken (see TakenTotals) and one seq number per row; a
// merchant without a balance row gets neither on its rows.
func Sequence(rows []Row, bals []Balance, taken map[string]int64) {
	type cursor struct{ balance, seq int64 }
	at := make(map[string]*cursor, len(bals))
	counts := RowCounts(rows)
	policies := PoliciesOf(bals)
	for _, b := range bals {
		at[b.MerchantID] = &cursor{balance: b.Available() + taken[b.MerchantID], seq: b.Seq - counts[b.MerchantID]}
	}
	for i := range rows {
		r := &rows[i]
		c, known := at[r.MerchantID]
		r.Overage = 0
		if !known {
			r.BalanceAfter, r.Seq = nil, nil
			continue
		}
		switch r.Kind {
		case KindDebit:
			r.Overage = policies[r.MerchantID].Overage(c.balance, r.Amount)
			c.balance -= r.Amount
		case KindExpire:
			c.balance -= r.Amount
		case KindCredit, KindBilled, KindRefund:
			c.balance += r.Amount
		}
		c.seq++
		after, seq := c.balance, c.seq
		r.BalanceAfter, r.Seq = &after, &seq
	}
}

// StaleRejection returns a *GuardError (Covered) for the first rejected row
// that MySQL disagrees with, or nil. BalanceAfter is MySQL's balance at the
// row; the merchant's policy (reject when absent) says what it covers.
func StaleRejection(rows []Row, policies map[string]Policy) *GuardError {
	for _, r := range rows {
		if r.Kind != KindRejected {
			continue
		}
		unknown := r.BalanceAfter == nil
		covered := !unknown && policies[r.MerchantID].Covers(*r.BalanceAfter, r.Amount)
		if unknown != (r.Reason == ReasonUnknownMerchant) || covered {
			return &GuardError{MerchantID: r.MerchantID, Amount: r.Amount, Covered: true}
		}
	}
	return nil
}

// PoliciesOf maps each balance's merchant to its policy.
func PoliciesOf(bals []Balance) map[string]Policy {
	out := make(map[string]Policy, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b.Policy()
	}
	return out
}

// PolicyKind is a merchant's overdraft policy.
type PolicyKind string

// The overdraft policies.
const (
	PolicyReject  PolicyKind = "reject"  // the balance never goes below 0 (the default)
	PolicyFloor   PolicyKind = "floor"   // down to -Floor
	PolicyOverage PolicyKind = "overage" // never rejects; the part below 0 is overage
)

// Policy is a merchant's overdraft policy.
type Policy struct {
	Kind  PolicyKind
	Floor int64 // PolicyFloor only
}

func (p Policy) String() string {
	if p.Kind == PolicyFloor {
		return "floor " + strconv.FormatInt(p.Floor, 10)
	}
	if p.Kind == "" {
		return string(PolicyReject)
	}
	return string(p.Kind)
}

// Lowest is the lowest balance the policy allows; false when unbounded (overage).
func (p Policy) Lowest() (int64, bool) {
	switch p.Kind {
	case PolicyOverage:
		return 0, false
	case PolicyFloor:
		return -p.Floor, true
	}
	return 0, true
}

// Covers reports whether a balance may pay amount: available - amount stays
// at or above the policy's lowest balance (always, under overage).
func (p Policy) Covers(available, amount int64) bool {
	lowest, bounded := p.Lowest()
	return !bounded || available-amount >= lowest
}

// Overage is the part of a debit of amount, from balance before, that falls
// below zero under the overage policy; 0 under the others.
func (p Policy) Overage(before, amount int64) int64 {
	if p.Kind != PolicyOverage {
		return 0
	}
	return min(amount, max(amount-max(before, 0), 0))
}

// RedisFloor is the policy as the quota hash's floor field holds it:
// "inf" for overage, else the floor in units.
func (p Policy) RedisFloor() string {
	lowest, bounded := p.Lowest()
	if !bounded {
		return "inf"
	}
	return strconv.FormatInt(-lowest, 10)
}

// Policy is the merchant's overdraft policy.
func (b Balance) Policy() Policy {
	return Policy{Kind: b.PolicyKind, Floor: b.OverdraftFloor}
}
