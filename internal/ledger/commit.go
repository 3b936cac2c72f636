package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"gorm.io/gorm"
)

// Commit records one batch in one transaction: every row is inserted (debits
// and rejections alike; use Grant for credits) and each merchant's balance
// moves once, by the sum of its debit rows, behind the overdraft guard. One
// UPDATE moves every balance of the batch (see guardedDebit); it locks their
// rows in primary-key order, so two batches never lock each other's rows in
// opposite orders.
//
// A rejected row is written only when MySQL, in the same transaction, agrees:
// its merchant's balance at that row cannot cover the amount (insufficient),
// or the merchant has no balance row (unknown_merchant). Otherwise the cache
// that rejected it under-reported, and nothing is written (*GuardError with
// Covered).
//
// Commit fills in the ID (when zero: a fresh one per transaction attempt, see
// MaxTxAge), BalanceAfter and CreatedAt of rows.
// BalanceAfter is the merchant's MySQL balance after the row, in the order of
// rows: the truth, whatever the cache said. It is nil for a merchant without a
// balance row.
//
// Errors: *GuardError (nothing written; the cache was stale either way), ErrDuplicate
// (nothing written), *RefusedError (nothing written; EventID set when the
// offending row is known), other errors transient. With a transient error the
// outcome may be unknown (a commit whose reply was lost): ask ExistingEvents.
func (s *Store) Commit(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if r.Kind == KindCredit {
			return fmt.Errorf("ledger: Commit does not write credits (event %s); use Grant", r.EventID)
		}
		if err := r.Check(); err != nil {
			return &RefusedError{EventID: r.EventID, Err: err}
		}
	}
	release, err := s.admit(ctx, len(rows))
	if err != nil {
		return err
	}
	defer release()
	fresh := freshIDs(rows)
	debits, merchants := debitTotals(rows)
	now := s.now().UTC()
	for i := range rows {
		if rows[i].CreatedAt.IsZero() {
			rows[i].CreatedAt = now
		}
	}
	update, args, guarded := guardedDebit(merchants, debits)
	for attempt := 1; ; attempt++ {
		err := s.inTx(ctx, func(tx *gorm.DB) error {
			if err := s.assignIDs(rows, fresh); err != nil {
				return err
			}
			if guarded > 0 {
				n, err := execRaw(tx, update, args)
				if err != nil {
					return fmt.Errorf("ledger: debit %d merchants: %w", guarded, err)
				}
				if n != int64(guarded) {
					return errGuardShort
				}
			}
			bals, err := balancesInTx(tx, merchants)
			if err != nil {
				return err
			}
			setBalanceAfter(rows, bals, debits)
			if g := staleRejection(rows); g != nil {
				return g
			}
			return s.insert(tx, rows)
		})
		if !errors.Is(err, errGuardShort) {
			return classify(err, rows)
		}
		// Rolled back. Name the merchant (the first, in merchant order) whose
		// guard refused; a balance raised meanwhile (a grant) lets it pass now.
		guard, err := s.refusedGuard(ctx, merchants, debits)
		switch {
		case err != nil:
			return err
		case guard != nil:
			return guard
		}
		if attempt >= attempts {
			return fmt.Errorf("ledger: gave up after %d attempts: the balance guard refused the batch but every balance covers it", attempt)
		}
	}
}

// debitTotals sums the debit rows per merchant and lists every merchant of rows, sorted.
func debitTotals(rows []Row) (map[string]int64, []string) {
	totals := make(map[string]int64)
	for _, r := range rows {
		if r.Kind == KindDebit {
			totals[r.MerchantID] += r.Amount
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

// setBalanceAfter walks rows in order from each merchant's balance before the
// batch (its balance now plus what the batch debited).
func setBalanceAfter(rows []Row, bals []Balance, debits map[string]int64) {
	running := make(map[string]int64, len(bals))
	for _, b := range bals {
		running[b.MerchantID] = b.Available() + debits[b.MerchantID]
	}
	for i := range rows {
		bal, known := running[rows[i].MerchantID]
		if !known {
			rows[i].BalanceAfter = nil
			continue
		}
		if rows[i].Kind == KindDebit {
			bal -= rows[i].Amount
			running[rows[i].MerchantID] = bal
		}
		v := bal
		rows[i].BalanceAfter = &v
	}
}

// staleRejection returns a *GuardError (Covered) for the first rejected row
// that MySQL disagrees with, or nil. BalanceAfter is MySQL's balance at the row.
func staleRejection(rows []Row) *GuardError {
	for _, r := range rows {
		if r.Kind != KindRejected {
			continue
		}
		unknown := r.BalanceAfter == nil
		agrees := unknown == (r.Reason == ReasonUnknownMerchant) && (unknown || *r.BalanceAfter < r.Amount)
		if !agrees {
			return &GuardError{MerchantID: r.MerchantID, Amount: r.Amount, Covered: true}
		}
	}
	return nil
}

// chunkError remembers where in rows a failed INSERT statement started.
type chunkError struct {
	offset int
	err    error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

// classify turns a failed transaction into the package's errors.
func classify(err error, rows []Row) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrGuard):
		return err
	case duplicate(err):
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	case refused(err):
		re := &RefusedError{Err: err}
		var ce *chunkError
		if errors.As(err, &ce) {
			if i := refusedRow(err); i >= 0 && ce.offset+i < len(rows) {
				re.EventID = rows[ce.offset+i].EventID
			}
		}
		return re
	}
	return fmt.Errorf("ledger: commit: %w", err)
}
