package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// Commit records one batch (debits and rejections; Grant writes credits) in
// one transaction: one UPDATE moves each merchant's balance by its debits,
// behind the overdraft guard, and takes the seq numbers of its rows (see
// balanceMove); then every row is inserted, and the refunds that waited for
// these payments are settled (Refund; a row's Refunded says what came back).
// A rejected row is written only
// when MySQL, in the same transaction, agrees: the balance at that row cannot
// cover it, or there is no balance row (unknown_merchant); otherwise the cache
// under-reported (*GuardError, Covered).
//
// Commit fills in ID (when zero: fresh per attempt, see MaxTxAge), CreatedAt,
// Seq and BalanceAfter: MySQL's balance after the row; both nil for an
// unknown merchant.
//
// Errors (nothing written): *GuardError, *ExpiryDueError, ErrDuplicate,
// *RefusedError (EventID set when the row is known); others are transient,
// and the outcome may be unknown (a lost COMMIT reply): ask ExistingEvents.
func (s *Store) Commit(ctx context.Context, rows []ledger.Row) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if r.Kind != ledger.KindDebit && r.Kind != ledger.KindRejected {
			return fmt.Errorf("ledger: Commit writes debits and rejections, not %s (event %s)", r.Kind, r.EventID)
		}
		if err := r.Check(); err != nil {
			return &ledger.RefusedError{EventID: r.EventID, Err: err}
		}
	}
	release, err := s.admit(ctx, len(rows))
	if err != nil {
		return err
	}
	defer release()
	fresh := freshIDs(rows)
	debits, merchants := ledger.TakenTotals(rows)
	now := s.now().UTC()
	for i := range rows {
		if rows[i].CreatedAt.IsZero() {
			rows[i].CreatedAt = now
		}
	}
	update, args := balanceMove(merchants, debits, ledger.RowCounts(rows))
	wrote := false // the committed attempt wrote balance events
	for attempt := 1; ; attempt++ {
		err := s.inTx(ctx, sqltx.ReadCommitted, func(ctx context.Context, tx *sql.Tx) error {
			if err := s.assignIDs(rows, fresh); err != nil {
				return err
			}
			for i := range rows {
				rows[i].Refunded = 0
			}
			moved, err := s.exec(ctx, tx, update, args)
			if err != nil {
				return fmt.Errorf("ledger: move %d balances: %w", len(merchants), err)
			}
			bals, err := s.balancesInTx(ctx, tx, merchants)
			if err != nil {
				return err
			}
			if moved != movable(bals, debits) {
				return errGuardShort
			}
			ledger.Sequence(rows, bals, debits)
			if g := ledger.StaleRejection(rows, ledger.PoliciesOf(bals)); g != nil {
				return g
			}
			if err := s.burn(ctx, tx, rows, bals, debits, now); err != nil {
				return err
			}
			if err := s.insert(ctx, tx, rows); err != nil {
				return err
			}
			evs := s.batchEvents(rows, bals)
			if ids := waitingFor(rows, bals); len(ids) > 0 {
				refunds, after, err := s.settlePending(ctx, tx, rows, ids, bals)
				if err != nil {
					return err
				}
				evs = s.batchEvents(append(slices.Clip(rows), refunds...), after)
				if err := s.billedBase(ctx, tx, refunds); err != nil {
					return err
				}
			}
			wrote = len(evs) > 0
			return s.writeOutbox(ctx, tx, evs)
		})
		if err == nil && wrote {
			s.eventsWritten()
		}
		if !errors.Is(err, errGuardShort) {
			return classify(err, rows)
		}
		// Rolled back. An expiry that was due refused it: the caller drops
		// the caches, records the expiries (Expire) and redoes the batch.
		due, err := s.DueAmong(ctx, merchants)
		if err != nil {
			return err
		}
		if len(due) > 0 {
			return &ledger.ExpiryDueError{Merchants: due}
		}
		// Name the merchant (the first, in merchant order) whose guard
		// refused; a balance raised meanwhile (a grant), or a merchant
		// created meanwhile, lets it pass now.
		guard, err := s.refusedGuard(ctx, merchants, debits)
		switch {
		case err != nil:
			return err
		case guard != nil:
			return guard
		}
		if attempt >= sqltx.Attempts {
			return fmt.Errorf("ledger: gave up after %d attempts: the balance guard refused the batch but every balance covers it", attempt)
		}
	}
}

// waitingFor lists the events of rows that refunds may wait for: those of
// merchants whose balance row counts some (RefundsWaiting), and of unknown
// merchants (no row counts theirs). A batch of other merchants reads nothing
// more.
func waitingFor(rows []ledger.Row, bals []ledger.Balance) []string {
	waits := make(map[string]bool, len(bals))
	for _, b := range bals {
		waits[b.MerchantID] = b.RefundsWaiting > 0
	}
	var ids []string
	for _, r := range rows {
		if w, known := waits[r.MerchantID]; w || !known {
			ids = append(ids, r.EventID)
		}
	}
	return ids
}

// errGuardShort: the balance UPDATE moved fewer balances than it was given;
// the transaction is rolled back and refusedGuard names the merchant.
var errGuardShort = errors.New("ledger: a balance guard refused its debit")

// balanceMove builds the one statement that moves the balance of every
// merchant of a batch (args: debits, each merchant's debit total; rows, its
// number of rows), each behind its own guards:
//
//	UPDATE merchant_balance FORCE INDEX (PRIMARY)
//	SET debited = debited + CASE merchant_id WHEN ? THEN ? ... ELSE 0 END,
//	    seq = seq + CASE merchant_id WHEN ? THEN ? ... END
//	WHERE merchant_id IN (?, ...)
//	  AND (next_expiry IS NULL OR next_expiry > UTC_TIMESTAMP(6))
//	  AND (merchant_id IN (<no debit>) OR overdraft_policy = 'overage'
//	       OR credited - debited + overdraft_floor >= CASE merchant_id WHEN ? THEN ? ... END)
//
// seq hands each merchant's rows their numbers under the row's lock, so a
// merchant's ledger order is the order its balance moved. A merchant whose
// guard fails (or who has no row) is not matched: fewer rows than movable. The
// expiry clause makes MySQL's clock the boundary of a grant's life: nothing of
// a merchant commits once an expiry is due and unrecorded, so a debit before
// it is paid by the expiring grant and one after it by the next. The hint
// keeps it locking through the primary key, in key order (no deadlock between
// batches): a full index scan would lock every row it reads.
func balanceMove(merchants []string, debits, rows map[string]int64) (sql string, args []any) {
	var debited, rest []string
	for _, m := range merchants {
		if debits[m] != 0 {
			debited = append(debited, m)
		} else {
			rest = append(rest, m)
		}
	}
	debit, debitArgs := caseOf(debited, debits)
	count, countArgs := caseOf(merchants, rows)
	in, ids := sqltx.InList(merchants)
	sql = "UPDATE merchant_balance FORCE INDEX (PRIMARY) SET debited = debited + " + debit + ", seq = seq + " + count +
		" WHERE merchant_id IN (" + in + ") AND (next_expiry IS NULL OR next_expiry > UTC_TIMESTAMP(6))"
	args = append(append(append(args, debitArgs...), countArgs...), ids...)
	if len(debited) == 0 {
		return sql, args
	}
	guard := "overdraft_policy = 'overage' OR credited - debited + overdraft_floor >= " + debit
	if len(rest) > 0 {
		restIn, restIDs := sqltx.InList(rest)
		guard = "merchant_id IN (" + restIn + ") OR " + guard
		args = append(args, restIDs...)
	}
	return sql + " AND (" + guard + ")", append(args, debitArgs...)
}

// caseOf is "CASE merchant_id WHEN ? THEN ? ... ELSE 0 END" over merchants,
// with values[m] for each, and its arguments.
func caseOf(merchants []string, values map[string]int64) (string, []any) {
	if len(merchants) == 0 {
		return "0", nil
	}
	args := make([]any, 0, 2*len(merchants))
	for _, m := range merchants {
		args = append(args, m, values[m])
	}
	return "CASE merchant_id" + strings.Repeat(" WHEN ? THEN ?", len(merchants)) + " ELSE 0 END", args
}

// movable is how many balance rows balanceMove must have moved: every
// merchant with a debit (one without a row refuses, as the guard does) and
// every other one that has a row (bals, read after the move).
func movable(bals []ledger.Balance, debits map[string]int64) int64 {
	n := int64(0)
	for _, d := range debits {
		if d != 0 {
			n++
		}
	}
	for _, b := range bals {
		if debits[b.MerchantID] == 0 {
			n++
		}
	}
	return n
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
func (s *Store) refusedGuard(ctx context.Context, merchants []string, debits map[string]int64) (*ledger.GuardError, error) {
	debited := withDebits(merchants, debits)
	bals, err := s.Balances(ctx, debited)
	if err != nil {
		return nil, err
	}
	for _, m := range debited {
		if b, known := bals[m]; !known || !b.Policy().Covers(b.Available(), debits[m]) {
			return &ledger.GuardError{MerchantID: m, Amount: debits[m]}, nil
		}
	}
	return nil, nil
}

// balancesInTx reads the balances of merchants in the batch's transaction,
// after the UPDATE that locked them: what this transaction made of them.
// (Under READ COMMITTED a merchant with no row takes no lock: a grant may
// create it before this commits, but the rejection was decided while it
// did not exist, and the merchant locks keep the two apart anyway.)
func (s *Store) balancesInTx(ctx context.Context, tx *sql.Tx, merchants []string) ([]ledger.Balance, error) {
	in, args := sqltx.InList(merchants)
	bals := make([]ledger.Balance, 0, len(merchants))
	err := s.query(ctx, tx, "SELECT "+balanceColumns+" FROM merchant_balance WHERE merchant_id IN ("+in+")",
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
func (s *Store) insert(ctx context.Context, tx *sql.Tx, rows []ledger.Row) error {
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

// rowColumns are the quota_ledger columns, in the order of insertArgs.
const rowColumns = "id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at, overage, grant_id, seq"

func insertSQL(rows int) string {
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return "INSERT INTO quota_ledger (" + rowColumns + ") VALUES " +
		tuple + strings.Repeat(", "+tuple, rows-1)
}

func insertArgs(rows []ledger.Row) []any {
	args := make([]any, 0, 14*len(rows))
	for _, r := range rows {
		args = append(args, r.ID, r.EventID, r.MerchantID, string(r.Kind), r.Amount, r.BalanceAfter,
			r.Reason, r.PaymentID, r.Source, r.OccurredAt, r.CreatedAt, r.Overage, r.GrantID, r.Seq)
	}
	return args
}

func duplicate(err error) bool { return failure.MySQLNumber(err) == failure.MySQLDupEntry }

func refused(err error) bool {
	switch failure.MySQLNumber(err) {
	case failure.MySQLDataTooLong, failure.MySQLOutOfRange, failure.MySQLTruncated, failure.MySQLIncorrectValue,
		failure.MySQLBadDatetime, failure.MySQLNotNull, failure.MySQLValueOutOfRange, failure.MySQLCheckMySQL,
		failure.MySQLCheckMariaDB:
		return true
	}
	return false
}

var atRow = regexp.MustCompile(`at row (\d+)\s*$`)

// refusedRow returns the 0-based row of a multi-row INSERT named by the
// server's message ("... at row N"), or -1.
func refusedRow(err error) int {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return -1
	}
	m := atRow.FindStringSubmatch(strings.TrimSpace(me.Message))
	if m == nil {
		return -1
	}
	if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 {
		return n - 1
	}
	return -1
}

// chunkError remembers where in rows a failed INSERT statement started.
type chunkError struct {
	offset int
	err    error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

// classify turns a failed transaction into the ledger's errors.
func classify(err error, rows []ledger.Row) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrGuard):
		return err
	case duplicate(err):
		return fmt.Errorf("%w: %w", ledger.ErrDuplicate, err)
	case refused(err):
		re := &ledger.RefusedError{Err: err}
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
