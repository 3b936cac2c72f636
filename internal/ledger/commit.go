package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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

// errGuardShort: the guarded UPDATE moved fewer balances than it was given;
// the transaction is rolled back and refusedGuard names the merchant.
var errGuardShort = errors.New("ledger: a balance guard refused its debit")

// guardedDebit builds the one statement that moves the balance of every
// merchant with a debit total, each behind its own overdraft guard:
//
//	UPDATE merchant_balance FORCE INDEX (PRIMARY)
//	SET debited = debited + CASE merchant_id WHEN ? THEN ? ... END
//	WHERE merchant_id IN (?, ...)
//	  AND credited - debited >= CASE merchant_id WHEN ? THEN ? ... END
//
// A merchant whose guard fails (or who has no row) is not matched, so the
// statement affects fewer rows than guarded, the number of merchants it names.
// It reads and locks the rows through the primary key, in key order. The hint
// matters: when the batch names a good share of the table, the optimizer
// would rather scan the whole index, which locks every row it reads (at
// REPEATABLE READ) and so serializes every concurrent batch.
func guardedDebit(merchants []string, debits map[string]int64) (sql string, args []any, guarded int) {
	debited := withDebits(merchants, debits)
	if len(debited) == 0 {
		return "", nil, 0
	}
	pairs := make([]any, 0, 2*len(debited))
	for _, m := range debited {
		pairs = append(pairs, m, debits[m])
	}
	in, ids := InList(debited)
	amount := "CASE merchant_id" + strings.Repeat(" WHEN ? THEN ?", len(debited)) + " END"
	sql = "UPDATE merchant_balance FORCE INDEX (PRIMARY) SET debited = debited + " + amount +
		" WHERE merchant_id IN (" + in + ") AND credited - debited >= " + amount
	args = make([]any, 0, 2*len(pairs)+len(ids))
	args = append(append(append(args, pairs...), ids...), pairs...)
	return sql, args, len(debited)
}

// withDebits lists the merchants with a debit total, in the order of merchants.
func withDebits(merchants []string, debits map[string]int64) []string {
	var out []string
	for _, m := range merchants {
		if debits[m] != 0 {
			out = append(out, m)
		}
	}
	return out
}

// refusedGuard reads the balances of the merchants with a debit and returns
// the first, in merchant order, that cannot cover its debit or has no balance
// row, or nil when every one can.
func (s *Store) refusedGuard(ctx context.Context, merchants []string, debits map[string]int64) (*GuardError, error) {
	debited := withDebits(merchants, debits)
	bals, err := s.Balances(ctx, debited)
	if err != nil {
		return nil, err
	}
	for _, m := range debited {
		if b, known := bals[m]; !known || b.Available() < debits[m] {
			return &GuardError{MerchantID: m, Amount: debits[m]}, nil
		}
	}
	return nil, nil
}

// balancesInTx reads the balances of merchants inside the batch's
// transaction, after the guarded UPDATE, which it sees (for balance_after).
// It reads them locked (shared): a rejection is checked against the balance
// as it stands until the commit, so a grant cannot land between the check and
// the rejected row. The debited rows are locked already; the others are
// locked by nobody else while their merchants' Redis locks hold, so this
// costs no wait in the normal case.
func balancesInTx(tx *gorm.DB, merchants []string) ([]Balance, error) {
	in, args := InList(merchants)
	bals := make([]Balance, 0, len(merchants))
	err := queryRaw(tx, "SELECT merchant_id, credited, debited FROM merchant_balance WHERE merchant_id IN ("+in+") LOCK IN SHARE MODE",
		args, func(rows *sql.Rows) error {
			var b Balance
			if err := rows.Scan(&b.MerchantID, &b.Credited, &b.Debited); err != nil {
				return err
			}
			bals = append(bals, b)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: read balances: %w", err)
	}
	return bals, nil
}

// insertColumns are the columns of quota_ledger that insert writes, in the
// order of InsertStatement's values.
const insertColumns = "id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at"

// insert writes rows with multi-row INSERTs of at most InsertChunk rows each.
func (s *Store) insert(tx *gorm.DB, rows []Row) error {
	for off := 0; off < len(rows); off += s.opts.InsertChunk {
		chunk := rows[off:min(off+s.opts.InsertChunk, len(rows))]
		query, args := InsertStatement(chunk)
		if _, err := execRaw(tx, query, args); err != nil {
			return &chunkError{offset: off, err: err}
		}
	}
	return nil
}

// InsertStatement is one INSERT of rows into quota_ledger, with placeholders,
// and its arguments: every column is written, ID and CreatedAt included.
func InsertStatement(rows []Row) (string, []any) {
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(len("INSERT INTO quota_ledger () VALUES ") + len(insertColumns) + len(rows)*(len(tuple)+2))
	b.WriteString("INSERT INTO quota_ledger (" + insertColumns + ") VALUES ")
	args := make([]any, 0, 11*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
		var after any
		if r.BalanceAfter != nil {
			after = *r.BalanceAfter
		}
		args = append(args, r.ID, r.EventID, r.MerchantID, string(r.Kind), r.Amount, after,
			r.Reason, r.PaymentID, r.Source, r.OccurredAt, r.CreatedAt)
	}
	return b.String(), args
}
