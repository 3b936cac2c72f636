package ledgerdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// StatementVisitor receives what ReadStatements reads, in order: Start once
// with the snapshot's time, then for each merchant its balance row
// (Merchant) followed by its ledger rows in seq order (Row; r is reused).
type StatementVisitor struct {
	Start    func(asOf time.Time) error
	Merchant func(b ledger.Balance) error
	Row      func(r *ledger.Row) error
}

// DefaultStatementPage is how many merchants ReadStatements reads per page.
const DefaultStatementPage = 1000

// ReadStatements reads, in one consistent snapshot (START TRANSACTION WITH
// CONSISTENT SNAPSHOT, repeatable read, read only, on one connection), the
// balance rows of merchants (all when empty) in merchant order, a page of
// them at a time, and after each one its ledger rows in seq order: one
// ordered range of the index (merchant_id, seq) per page. A transaction that
// commits meanwhile is in no part of what it reads. Rows without a seq (the
// rejections of an unknown merchant) belong to no merchant's ledger order
// and are not read. A listed merchant without a balance row is
// ledger.ErrUnknownMerchant.
//
// It holds one read view for as long as it runs: InnoDB keeps the row
// versions it may still see (purge waits), which a long export costs.
func ReadStatements(ctx context.Context, db *sql.DB, merchants []string, page int, v StatementVisitor) (err error) {
	if page <= 0 {
		page = DefaultStatementPage
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("ledger: statements: %w", err)
	}
	defer conn.Close()
	for _, q := range []string{"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("ledger: statements: %s: %w", q, err)
		}
	}
	defer endSnapshot(ctx, conn)
	var asOf time.Time
	if err := conn.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&asOf); err != nil {
		return fmt.Errorf("ledger: statements: snapshot time: %w", err)
	}
	if err := v.Start(asOf.UTC()); err != nil {
		return err
	}
	all, listed := len(merchants) == 0, slices.Compact(slices.Sorted(slices.Values(merchants)))
	after := ""
	for {
		var bals []ledger.Balance
		if all {
			bals, err = balancePage(ctx, conn, "merchant_id > ? ORDER BY merchant_id LIMIT ?", []any{after, page})
		} else if len(listed) > 0 {
			n := min(page, len(listed), maxListedPage)
			in, args := sqltx.InList(listed[:n])
			bals, err = balancePage(ctx, conn, "merchant_id IN ("+in+") ORDER BY merchant_id", args)
			if err == nil && len(bals) < n {
				err = fmt.Errorf("%w: %v", ledger.ErrUnknownMerchant, missing(listed[:n], bals))
			}
			listed = listed[n:]
		}
		if err != nil || len(bals) == 0 {
			return err
		}
		if err := pageRows(ctx, conn, bals, all, v); err != nil {
			return err
		}
		after = bals[len(bals)-1].MerchantID
	}
}

// endSnapshot rolls the snapshot back; a connection that cannot is dropped
// from the pool rather than handed on inside a transaction.
func endSnapshot(ctx context.Context, conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

func balancePage(ctx context.Context, conn *sql.Conn, where string, args []any) ([]ledger.Balance, error) {
	var bals []ledger.Balance
	_, err := sqltx.Each(ctx, conn, "SELECT "+balanceColumns+" FROM merchant_balance WHERE "+where, args, func(rows *sql.Rows) error {
		b, err := scanBalance(rows)
		bals = append(bals, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: statements: balances: %w", err)
	}
	return bals, nil
}

// maxListedPage bounds a page of listed merchants. MariaDB turns an IN list
// of in_predicate_conversion_threshold (1000) literal values or more (the
// programs' pools interpolate values) into a join with a table of them: on a
// ledger of 3 M rows that read the whole (merchant_id, seq) index for each
// page (EXPLAIN type index) where 999 values read their ranges.
const maxListedPage = 500

// pageRows streams the ledger rows of the merchants of bals (sorted) and
// calls v.Merchant before each merchant's rows, also for one without rows.
// A page of all merchants is every merchant from its first to its last, so
// one range of the index reads it; listed merchants are an IN list.
func pageRows(ctx context.Context, conn *sql.Conn, bals []ledger.Balance, all bool, v StatementVisitor) error {
	where, args := "merchant_id BETWEEN ? AND ?", []any{bals[0].MerchantID, bals[len(bals)-1].MerchantID}
	if !all {
		ids := make([]string, len(bals))
		for i, b := range bals {
			ids[i] = b.MerchantID
		}
		var in string
		in, args = sqltx.InList(ids)
		where = "merchant_id IN (" + in + ")"
	}
	next := 0 // bals[next] is the next merchant to announce
	announce := func(upTo string) error {
		for ; next < len(bals) && bals[next].MerchantID <= upTo; next++ {
			if err := v.Merchant(bals[next]); err != nil {
				return err
			}
		}
		return nil
	}
	var r ledger.Row
	_, err := sqltx.Each(ctx, conn, statementRowsSQL(where), args, func(rows *sql.Rows) error {
		if err := scanRow(rows, &r); err != nil {
			return err
		}
		if err := announce(r.MerchantID); err != nil {
			return err
		}
		return v.Row(&r)
	})
	if err != nil {
		return fmt.Errorf("ledger: statements: rows: %w", err)
	}
	return announce(bals[len(bals)-1].MerchantID)
}

// statementRowsSQL reads the rows of the merchants where picks in
// (merchant_id, seq) order: ranges of that index read in order, no sort
// (forced: on a small table the optimizer would rather scan and sort).
func statementRowsSQL(where string) string {
	return "SELECT " + rowColumns + " FROM quota_ledger FORCE INDEX (quota_ledger_merchant_seq) WHERE " + where +
		" AND seq IS NOT NULL ORDER BY merchant_id, seq"
}

// scanRow reads the rowColumns of a row into r. Every destination is one
// database/sql converts without reflection (an export scans millions).
func scanRow(rows *sql.Rows, r *ledger.Row) error {
	var kind string
	var after, seq sql.NullInt64
	var grant sql.NullString
	err := rows.Scan(&r.ID, &r.EventID, &r.MerchantID, &kind, &r.Amount, &after, &r.Reason, &r.PaymentID, &r.Source,
		&r.OccurredAt, &r.CreatedAt, &r.Overage, &grant, &seq)
	r.Kind, r.OccurredAt, r.CreatedAt = ledger.Kind(kind), r.OccurredAt.UTC(), r.CreatedAt.UTC()
	r.BalanceAfter, r.Seq, r.GrantID = nil, nil, nil
	if after.Valid {
		r.BalanceAfter = &after.Int64
	}
	if seq.Valid {
		r.Seq = &seq.Int64
	}
	if grant.Valid {
		r.GrantID = &grant.String
	}
	return err
}

func missing(listed []string, bals []ledger.Balance) []string {
	var out []string
	for _, m := range listed {
		if !slices.ContainsFunc(bals, func(b ledger.Balance) bool { return b.MerchantID == m }) {
			out = append(out, m)
		}
	}
	return out
}
