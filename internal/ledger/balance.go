package ledger

import "sort"

// takenTotals sums what rows take from each merchant's balance (debits add,
// credits subtract) and lists every merchant of rows, sorted.
func takenTotals(rows []Row) (map[string]int64, []string) {
	totals := make(map[string]int64)
	for _, r := range rows {
		switch r.Kind {
		case KindDebit, KindExpire:
			totals[r.MerchantID] += r.Amount
		case KindCredit:
			totals[r.MerchantID] -= r.Amount
		default:
			if _, seen := totals[r.MerchantID]; seen {
				continue
			}
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

// setBalanceAfter walks rows in order from each merchant's balance before the
// batch (its balance now plus what the batch took, see takenTotals), and sets
// each debit's overage (the part below zero, under the overage policy).
func setBalanceAfter(rows []Row, bals []Balance, taken map[string]int64) {
	running := make(map[string]int64, len(bals))
	policies := policiesOf(bals)
	for _, b := range bals {
		running[b.MerchantID] = b.Available() + taken[b.MerchantID]
	}
	for i := range rows {
		bal, known := running[rows[i].MerchantID]
		if !known {
			rows[i].BalanceAfter = nil
			continue
		}
		rows[i].Overage = 0
		switch rows[i].Kind {
		case KindDebit:
			rows[i].Overage = policies[rows[i].MerchantID].Overage(bal, rows[i].Amount)
			bal -= rows[i].Amount
		case KindExpire:
			bal -= rows[i].Amount
		case KindCredit:
			bal += rows[i].Amount
		}
		running[rows[i].MerchantID] = bal
		v := bal
		rows[i].BalanceAfter = &v
	}
}

// staleRejection returns a *GuardError (Covered) for the first rejected row
// that MySQL disagrees with, or nil. BalanceAfter is MySQL's balance at the
// row; the merchant's policy (reject when absent) says what it covers.
func staleRejection(rows []Row, policies map[string]Policy) *GuardError {
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

// policiesOf maps each balance's merchant to its policy.
func policiesOf(bals []Balance) map[string]Policy {
	out := make(map[string]Policy, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b.Policy()
	}
	return out
}
