package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Commit records one batch (debits and rejections; Grant writes credits) in
// one transaction: every row is inserted and one UPDATE moves each merchant's
// balance by its debits, behind the overdraft guard (see guardedDebit). A
// rejected row is written only when MySQL, in the same transaction, agrees:
// the balance at that row cannot cover it, or there is no balance row
// (unknown_merchant); otherwise the cache under-reported (*GuardError, Covered).
//
// Commit fills in ID (when zero: fresh per attempt, see MaxTxAge), CreatedAt
// and BalanceAfter: MySQL's balance after the row, nil for an unknown merchant.
//
// Errors (nothing written): *GuardError, ErrDuplicate, *RefusedError (EventID
// set when the row is known); others are transient, and the outcome may be
// unknown (a lost COMMIT reply): ask ExistingEvents.
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
	debits, merchants := takenTotals(rows)
	now := s.now().UTC()
	for i := range rows {
		if rows[i].CreatedAt.IsZero() {
			rows[i].CreatedAt = now
		}
	}
	update, args, guarded := guardedDebit(merchants, debits)
	wrote := false // the committed attempt wrote balance events
	for attempt := 1; ; attempt++ {
		err := s.inSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := s.assignIDs(rows, fresh); err != nil {
				return err
			}
			if guarded > 0 {
				n, err := s.exec(ctx, tx, update, args)
				if err != nil {
					return fmt.Errorf("ledger: debit %d merchants: %w", guarded, err)
				}
				if n != int64(guarded) {
					return errGuardShort
				}
			}
			bals, err := s.balancesInTx(ctx, tx, merchants)
			if err != nil {
				return err
			}
			setBalanceAfter(rows, bals, debits)
			if g := staleRejection(rows, policiesOf(bals)); g != nil {
				return g
			}
			if err := s.burn(ctx, tx, rows, bals, debits, now); err != nil {
				return err
			}
			if err := s.insert(ctx, tx, rows); err != nil {
				return err
			}
			evs := s.batchEvents(rows, bals, debits)
			wrote = len(evs) > 0
			return writeOutbox(evs, func(q string, args []any) error {
				_, err := s.exec(ctx, tx, q, args)
				return err
			})
		})
		if err == nil && wrote {
			s.eventsWritten()
		}
		if !errors.Is(err, errGuardShort) {
			return classify(err, rows)
		}
		// Rolled back. An expiry that was due refused it: the caller drops
		// the caches, records the expiries (Expire) and redoes the batch.
		due, err := s.DueAmong(ctx, withDebits(merchants, debits))
		if err != nil {
			return err
		}
		if len(due) > 0 {
			return &ExpiryDueError{Merchants: due}
		}
		// Name the merchant (the first, in merchant order) whose guard
		// refused; a balance raised meanwhile (a grant) lets it pass now.
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
//	  AND (overdraft_policy = 'overage'
//	       OR credited - debited + overdraft_floor >= CASE merchant_id WHEN ? THEN ? ... END)
//	  AND (next_expiry IS NULL OR next_expiry > UTC_TIMESTAMP(6))
//
// A merchant whose guard fails (or who has no row) is not matched: fewer rows
// than guarded. The expiry clause makes MySQL's clock the boundary of a
// grant's life: no debit commits once an expiry is due and unrecorded, so a
// debit before it is paid by the expiring grant and one after it by the
// next. The hint keeps it locking through the primary key, in key order (no
// deadlock between batches): a full index scan would lock every row it reads
// and serialize all batches.
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
		" WHERE merchant_id IN (" + in + ") AND (overdraft_policy = 'overage' OR credited - debited + overdraft_floor >= " + amount + ")" +
		" AND (next_expiry IS NULL OR next_expiry > UTC_TIMESTAMP(6))"
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
		if b, known := bals[m]; !known || !b.Policy().Covers(b.Available(), debits[m]) {
			return &GuardError{MerchantID: m, Amount: debits[m]}, nil
		}
	}
	return nil, nil
}

// balancesInTx reads the balances of merchants in the batch's transaction,
// after the guarded UPDATE, locked (shared) so that no grant lands between a
// rejection's check and its commit. Under the merchants' Redis locks nobody
// else holds these rows: no wait in the normal case.
func (s *Store) balancesInTx(ctx context.Context, tx *sql.Tx, merchants []string) ([]Balance, error) {
	in, args := InList(merchants)
	bals := make([]Balance, 0, len(merchants))
	err := s.query(ctx, tx, "SELECT "+balanceColumns+" FROM merchant_balance WHERE merchant_id IN ("+in+") LOCK IN SHARE MODE",
		args, func(rows *sql.Rows) error {
			b, err := scanBalance(rows)
			if err != nil {
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

// insert writes rows with prepared multi-row INSERTs of power-of-two sizes
// from minPrepared up (see pow2Chunks), and the fewer than minPrepared rows
// left with one plain INSERT: a few statement shapes, and a small batch still
// takes a single statement.
func (s *Store) insert(ctx context.Context, tx *sql.Tx, rows []Row) error {
	off := 0
	write := func(c conn, n int) error {
		if _, err := s.exec(ctx, c, insertSQL(n), insertArgs(rows[off:off+n])); err != nil {
			return &chunkError{offset: off, err: err}
		}
		off += n
		return nil
	}
	for _, n := range pow2Chunks(len(rows)&^(minPrepared-1), s.opts.InsertChunk) {
		if err := write(prepared{stmts: s.stmts, tx: tx}, n); err != nil {
			return err
		}
	}
	if rest := len(rows) - off; rest > 0 {
		return write(tx, rest)
	}
	return nil
}

// minPrepared is the smallest INSERT worth a prepared statement (a power of two).
const minPrepared = 64

// InsertStatement is one INSERT of rows into quota_ledger, with placeholders,
// and its arguments: every column is written, ID and CreatedAt included.
func InsertStatement(rows []Row) (string, []any) {
	return insertSQL(len(rows)), insertArgs(rows)
}

func insertSQL(rows int) string {
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return "INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at, overage, grant_id) VALUES " +
		tuple + strings.Repeat(", "+tuple, rows-1)
}

func insertArgs(rows []Row) []any {
	args := make([]any, 0, 13*len(rows))
	for _, r := range rows {
		var after, grant any
		if r.BalanceAfter != nil {
			after = *r.BalanceAfter
		}
		if r.GrantID != nil {
			grant = *r.GrantID
		}
		args = append(args, r.ID, r.EventID, r.MerchantID, string(r.Kind), r.Amount, after,
			r.Reason, r.PaymentID, r.Source, r.OccurredAt, r.CreatedAt, r.Overage, grant)
	}
	return args
}
