package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

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
