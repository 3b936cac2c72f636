package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// balanceColumns are the merchant_balance columns scanBalance reads.
const balanceColumns = "merchant_id, credited, debited, low_units, low_percent, overdraft_policy, overdraft_floor, head_grant, head_end, next_expiry, seq, low_base, refunds_waiting"

// scanBalance reads the balanceColumns of a row, then any more columns into more.
func scanBalance(rows *sql.Rows, more ...any) (ledger.Balance, error) {
	var b ledger.Balance
	var head sql.NullString
	var end sql.NullInt64
	var next sql.NullTime
	dest := append([]any{&b.MerchantID, &b.Credited, &b.Debited, &b.LowUnits, &b.LowPercent, &b.PolicyKind, &b.OverdraftFloor, &head, &end, &next, &b.Seq, &b.LowBase, &b.RefundsWaiting}, more...)
	if err := rows.Scan(dest...); err != nil {
		return b, err
	}
	if head.Valid {
		b.HeadGrant = &head.String
	}
	if end.Valid {
		b.HeadEnd = &end.Int64
	}
	if next.Valid {
		t := next.Time.UTC()
		b.NextExpiry = &t
	}
	return b, nil
}

// remaining is the one definition of a grant's remaining over quota_grants
// g joined with its merchant_balance b: the head grant's is head_end -
// debited (the hot path moves only debited), any other's is its column.
const remaining = "CASE WHEN g.grant_id = b.head_grant THEN b.head_end - b.debited ELSE g.remaining END"

// loadBooks locks and reads the active grants of bals' merchants; before is
// each merchant's debited at which head_end was last set relative to (its
// debited before this transaction's own debits).
func (s *Store) loadBooks(ctx context.Context, tx *sql.Tx, bals []ledger.Balance, before map[string]int64) (map[string]*ledger.Book, error) {
	books := make(map[string]*ledger.Book, len(bals))
	ids := make([]string, 0, len(bals))
	for _, b := range bals {
		books[b.MerchantID] = ledger.NewBook(b)
		ids = append(ids, b.MerchantID)
	}
	if len(ids) == 0 {
		return books, nil
	}
	in, args := sqltx.InList(ids)
	err := s.query(ctx, tx, "SELECT "+grantColumns+" FROM quota_grants WHERE merchant_id IN ("+in+") AND state = 'active' FOR UPDATE",
		args, func(rows *sql.Rows) error {
			g, err := scanGrant(rows)
			if err == nil {
				books[g.MerchantID].Read(g, before[g.MerchantID])
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: read grants: %w", err)
	}
	for _, bk := range books {
		bk.Sort()
	}
	return books, nil
}

// debitedOf maps each balance's merchant to its debited.
func debitedOf(bals []ledger.Balance) map[string]int64 {
	out := make(map[string]int64, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b.Debited
	}
	return out
}

const grantColumns = "grant_id, merchant_id, amount, remaining, priority, starts_at, expires_at, rollover_max, state, created_at, ended_at"

func scanGrant(rows *sql.Rows) (ledger.Grant, error) {
	var g ledger.Grant
	var exp, ended sql.NullTime
	if err := rows.Scan(&g.ID, &g.MerchantID, &g.Amount, &g.Remaining, &g.Priority, &g.StartsAt, &exp, &g.RolloverMax, &g.State, &g.CreatedAt, &ended); err != nil {
		return g, err
	}
	g.StartsAt, g.CreatedAt = g.StartsAt.UTC(), g.CreatedAt.UTC()
	if exp.Valid {
		t := exp.Time.UTC()
		g.ExpiresAt = &t
	}
	if ended.Valid {
		t := ended.Time.UTC()
		g.EndedAt = &t
	}
	return g, nil
}

// saveBooks writes what changed in the books: grants inserted or updated (one
// upsert), and each merchant's head from its grants. debited is each
// merchant's debited after the transaction.
func (s *Store) saveBooks(ctx context.Context, tx *sql.Tx, books map[string]*ledger.Book, debited map[string]int64, now time.Time) error {
	var changed []ledger.Grant
	for _, bk := range books {
		changed = append(changed, bk.Changes(now)...)
	}
	if err := s.upsertGrants(ctx, tx, changed); err != nil {
		return err
	}
	// One statement moves every merchant's head, in key order.
	merchants := slices.Sorted(maps.Keys(books))
	if len(merchants) == 0 {
		return nil
	}
	var heads, ends, nexts []any
	for _, m := range merchants {
		id, end, next := books[m].HeadEnd(debited[m])
		heads, ends, nexts = append(heads, m, id), append(ends, m, end), append(nexts, m, next)
	}
	when := "CASE merchant_id" + strings.Repeat(" WHEN ? THEN ?", len(merchants)) + " END"
	in, ids := sqltx.InList(merchants)
	args := append(append(append(heads, ends...), nexts...), ids...)
	if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET head_grant = "+when+", head_end = "+when+", next_expiry = "+when+
		" WHERE merchant_id IN ("+in+")", args); err != nil {
		return fmt.Errorf("ledger: move the heads of %d merchant(s): %w", len(merchants), err)
	}
	return nil
}

func (s *Store) upsertGrants(ctx context.Context, tx *sql.Tx, grants []ledger.Grant) error {
	if len(grants) == 0 {
		return nil
	}
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	args := make([]any, 0, 11*len(grants))
	for _, g := range grants {
		args = append(args, g.ID, g.MerchantID, g.Amount, g.Remaining, g.Priority, g.StartsAt, g.ExpiresAt, g.RolloverMax, string(g.State), g.CreatedAt, g.EndedAt)
	}
	q := "INSERT INTO quota_grants (" + grantColumns + ") VALUES " + tuple + strings.Repeat(", "+tuple, len(grants)-1) +
		" ON DUPLICATE KEY UPDATE remaining = VALUES(remaining), state = VALUES(state), ended_at = VALUES(ended_at)"
	if _, err := s.exec(ctx, tx, q, args); err != nil {
		return fmt.Errorf("ledger: write %d grant(s): %w", len(grants), err)
	}
	return nil
}

// burn names the grant that paid each debit of rows: the head when it paid
// the merchant's whole batch (ledger.ByHead), at no cost; else the
// merchant's grants are locked, the batch attributed (ledger.PayDebits), the
// grants and the head written back, and the debits that more than one grant
// paid (or partly owed) listed in quota_attribution. bals are after the
// guarded UPDATE; debits what the batch debited.
func (s *Store) burn(ctx context.Context, tx *sql.Tx, rows []ledger.Row, bals []ledger.Balance, debits map[string]int64, now time.Time) error {
	slow := ledger.ByHead(rows, bals, debits)
	if len(slow) == 0 {
		return nil
	}
	before := make(map[string]int64, len(slow))
	for _, b := range slow {
		before[b.MerchantID] = b.Debited - debits[b.MerchantID]
	}
	books, err := s.loadBooks(ctx, tx, slow, before)
	if err != nil {
		return err
	}
	split := ledger.PayDebits(rows, books, debits, now)
	if err := s.saveBooks(ctx, tx, books, debitedOf(slow), now); err != nil {
		return err
	}
	if len(split) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(split))
	for _, a := range split {
		args = append(args, a.EventID, a.GrantID, a.Amount)
	}
	q := "INSERT INTO quota_attribution (event_id, grant_id, amount) VALUES (?, ?, ?)" + strings.Repeat(", (?, ?, ?)", len(split)-1)
	if _, err := s.exec(ctx, tx, q, args); err != nil {
		return fmt.Errorf("ledger: write %d attribution(s): %w", len(split), err)
	}
	return nil
}

// ReadGrants returns the grants of merchants (every merchant's when nil)
// read on q (the pool, or a caller's snapshot), with their true remaining,
// newest first.
func ReadGrants(ctx context.Context, q sqltx.Querier, merchants []string) ([]ledger.Grant, error) {
	return readGrants(ctx, merchants, func(query string, args []any, scan func(*sql.Rows) error) error {
		_, err := sqltx.Each(ctx, q, query, args, scan)
		return err
	})
}

func readGrants(ctx context.Context, merchants []string, run func(query string, args []any, scan func(*sql.Rows) error) error) ([]ledger.Grant, error) {
	var out []ledger.Grant
	cols := strings.Replace(strings.ReplaceAll("g."+grantColumns, ", ", ", g."), "g.remaining", remaining, 1)
	q := "SELECT " + cols + " FROM quota_grants g JOIN merchant_balance b ON b.merchant_id = g.merchant_id"
	var args []any
	if merchants != nil {
		if len(merchants) == 0 {
			return out, nil
		}
		var in string
		in, args = sqltx.InList(merchants)
		q += " WHERE g.merchant_id IN (" + in + ")"
	}
	err := run(q+" ORDER BY g.created_at DESC, g.grant_id", args, func(rows *sql.Rows) error {
		g, err := scanGrant(rows)
		out = append(out, g)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: grants: %w", err)
	}
	return out, nil
}

// Grants returns the merchants' grants, the active ones (state active) first
// in burn-down order, then the ended ones, newest first, at most limit of
// those (0: none).
func (s *Store) Grants(ctx context.Context, merchants []string, ended int) (map[string][]ledger.Grant, error) {
	if merchants == nil {
		merchants = []string{}
	}
	all, err := readGrants(ctx, merchants, func(query string, args []any, scan func(*sql.Rows) error) error {
		return s.query(ctx, s.db, query, args, scan)
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]ledger.Grant, len(merchants))
	nEnded := map[string]int{}
	var endedRows []ledger.Grant
	for _, g := range all {
		if g.State == ledger.GrantActive {
			out[g.MerchantID] = append(out[g.MerchantID], g)
		} else if nEnded[g.MerchantID] < ended {
			nEnded[g.MerchantID]++
			endedRows = append(endedRows, g)
		}
	}
	for m := range out {
		slices.SortFunc(out[m], ledger.BurnOrder)
	}
	for _, g := range endedRows {
		out[g.MerchantID] = append(out[g.MerchantID], g)
	}
	return out, nil
}
