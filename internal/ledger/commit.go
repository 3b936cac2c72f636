package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"gorm.io/gorm"
)

const guardSQL = "UPDATE merchant_balance SET debited = debited + ? WHERE merchant_id = ? AND credited - debited >= ?"

// Commit records one batch in one transaction: every row is inserted (debits
// and rejections alike; use Grant for credits) and each merchant's balance
// moves once, by the sum of its debit rows, behind the overdraft guard. The
// balances are touched in merchant order, so two batches never lock each
// other's rows in opposite orders.
//
// Commit fills in the ID (when zero), BalanceAfter and CreatedAt of rows.
// BalanceAfter is the merchant's MySQL balance after the row, in the order of
// rows: the truth, whatever the cache said. It is nil for a merchant without a
// balance row.
//
// Errors: *GuardError (nothing written; the cache was stale), ErrDuplicate
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
	if err := s.assignIDs(rows); err != nil {
		return err
	}
	debits, merchants := debitTotals(rows)
	now := s.now().UTC()
	for i := range rows {
		if rows[i].CreatedAt.IsZero() {
			rows[i].CreatedAt = now
		}
	}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		for _, m := range merchants {
			if debits[m] == 0 {
				continue
			}
			res := tx.Exec(guardSQL, debits[m], m, debits[m])
			if res.Error != nil {
				return fmt.Errorf("ledger: debit merchant %s: %w", m, res.Error)
			}
			if res.RowsAffected == 0 {
				return &GuardError{MerchantID: m, Amount: debits[m]}
			}
		}
		var bals []Balance
		if err := tx.Where("merchant_id IN ?", merchants).Find(&bals).Error; err != nil {
			return fmt.Errorf("ledger: read balances: %w", err)
		}
		setBalanceAfter(rows, bals, debits)
		return s.insert(tx, rows)
	})
	return classify(err, rows)
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

// chunkError remembers where in rows a failed INSERT statement started.
type chunkError struct {
	offset int
	err    error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

// insert writes rows with multi-row INSERTs of at most InsertChunk rows each.
func (s *Store) insert(tx *gorm.DB, rows []Row) error {
	for off := 0; off < len(rows); off += s.opts.InsertChunk {
		end := min(off+s.opts.InsertChunk, len(rows))
		chunk := rows[off:end]
		if err := tx.Create(&chunk).Error; err != nil {
			return &chunkError{offset: off, err: err}
		}
	}
	return nil
}

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
