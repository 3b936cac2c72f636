package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/sqltx"
)

// balanceColumns are the merchant_balance columns scanBalance reads.
const balanceColumns = "merchant_id, credited, debited, low_units, low_percent, overdraft_policy, overdraft_floor, head_grant, head_end, next_expiry, seq, low_base"

// scanBalance reads the balanceColumns of a row, then any more columns into more.
func scanBalance(rows *sql.Rows, more ...any) (Balance, error) {
	var b Balance
	var head sql.NullString
	var end sql.NullInt64
	var next sql.NullTime
	dest := append([]any{&b.MerchantID, &b.Credited, &b.Debited, &b.LowUnits, &b.LowPercent, &b.PolicyKind, &b.OverdraftFloor, &head, &end, &next, &b.Seq, &b.LowBase}, more...)
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

// RemainingSQL is the one definition of a grant's remaining over quota_grants
// g joined with its merchant_balance b: the head grant's is head_end -
// debited (the hot path moves only debited), any other's is its column.
const RemainingSQL = "CASE WHEN g.grant_id = b.head_grant THEN b.head_end - b.debited ELSE g.remaining END"

// noHead is head_end when no grant has a remainder: every debit is owed
// until a grant arrives (and moves the head).
const noHead = math.MaxInt64

// paidByHead says whether the debits of a batch that took b.Debited where it
// is were wholly paid by the head grant (or wholly owed with no grant left):
// the hot path, where no grant row is read or written.
func paidByHead(b Balance) bool {
	return b.HeadEnd != nil && b.Debited <= *b.HeadEnd
}

// book is one merchant's active grants inside a ledger transaction.
type book struct {
	bal    Balance
	grants []Grant          // active, with true remaining, in burn-down order
	stored map[string]Grant // as read, to write back only what changed
	ended  []Grant          // left the active set in this transaction
}

// loadBooks locks and reads the active grants of bals' merchants; before is
// each merchant's debited at which head_end was last set relative to (its
// debited before this transaction's own debits).
func (s *Store) loadBooks(ctx context.Context, tx *sql.Tx, bals []Balance, before map[string]int64) (map[string]*book, error) {
	books := make(map[string]*book, len(bals))
	ids := make([]string, 0, len(bals))
	for _, b := range bals {
		books[b.MerchantID] = &book{bal: b, stored: map[string]Grant{}}
		ids = append(ids, b.MerchantID)
	}
	if len(ids) == 0 {
		return books, nil
	}
	in, args := sqltx.InList(ids)
	err := s.query(ctx, tx, "SELECT "+grantColumns+" FROM quota_grants WHERE merchant_id IN ("+in+") AND state = 'active' FOR UPDATE",
		args, func(rows *sql.Rows) error {
			g, err := scanGrant(rows)
			if err != nil {
				return err
			}
			bk := books[g.MerchantID]
			// stored is the row as read: the head's column is stale (its
			// remaining lives in head_end), so the true value differs from it
			// and is written back when the head moves on.
			bk.stored[g.ID] = g
			if b := bk.bal; b.HeadGrant != nil && *b.HeadGrant == g.ID && b.HeadEnd != nil {
				g.Remaining = max(0, *b.HeadEnd-before[g.MerchantID])
			}
			bk.grants = append(bk.grants, g)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: read grants: %w", err)
	}
	for _, bk := range books {
		slices.SortFunc(bk.grants, BurnOrder)
	}
	return books, nil
}

// debitedOf maps each balance's merchant to its debited.
func debitedOf(bals []Balance) map[string]int64 {
	out := make(map[string]int64, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b.Debited
	}
	return out
}

const grantColumns = "grant_id, merchant_id, amount, remaining, priority, starts_at, expires_at, rollover_max, state, created_at, ended_at"

func scanGrant(rows *sql.Rows) (Grant, error) {
	var g Grant
	var exp, ended sql.NullTime
	var state string
	if err := rows.Scan(&g.ID, &g.MerchantID, &g.Amount, &g.Remaining, &g.Priority, &g.StartsAt, &exp, &g.RolloverMax, &state, &g.CreatedAt, &ended); err != nil {
		return g, err
	}
	g.State = GrantState(state)
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

// adopt backs a non-negative balance that no grant backs (a balance row
// written by hand) with a never-expiring opening grant. available is the
// balance the grants stand for.
func (bk *book) adopt(available int64, now time.Time) {
	if u := Unbacked(available, bk.grants); u > 0 {
		id := DerivedID("opening:", bk.bal.MerchantID+"@"+strconv.FormatInt(bk.bal.Debited, 10))
		bk.add(Grant{ID: id, MerchantID: bk.bal.MerchantID, Amount: u, Remaining: u, Priority: DefaultPriority,
			StartsAt: now, State: GrantActive, CreatedAt: now})
	}
}

// add puts a new grant in the book.
func (bk *book) add(g Grant) {
	bk.grants = append(bk.grants, g)
	slices.SortFunc(bk.grants, BurnOrder)
}

// save writes what changed in the books: grants inserted or updated (one
// upsert), and each merchant's head from its grants. debited is each
// merchant's debited after the transaction.
func (s *Store) saveBooks(ctx context.Context, tx *sql.Tx, books map[string]*book, debited map[string]int64, now time.Time) error {
	var changed []Grant
	merchants := make([]string, 0, len(books))
	for m, bk := range books {
		merchants = append(merchants, m)
		var active []Grant
		for _, g := range bk.grants {
			if g.Remaining == 0 && g.State == GrantActive {
				g.State, g.EndedAt = GrantUsed, &now
			}
			if g.State == GrantActive {
				active = append(active, g)
			}
			if old, ok := bk.stored[g.ID]; !ok || old.Remaining != g.Remaining || old.State != g.State {
				changed = append(changed, g)
			}
		}
		for _, g := range bk.ended {
			if old, ok := bk.stored[g.ID]; !ok || old.Remaining != g.Remaining || old.State != g.State {
				changed = append(changed, g)
			}
		}
		bk.grants = active
	}
	if err := s.upsertGrants(ctx, tx, changed); err != nil {
		return err
	}
	slices.Sort(merchants)
	for _, m := range merchants {
		head, next, ok := Head(books[m].grants)
		var id, exp any
		end := int64(noHead)
		if ok {
			id, end = head.ID, debited[m]+head.Remaining
		}
		if next != nil {
			exp = *next
		}
		if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET head_grant = ?, head_end = ?, next_expiry = ? WHERE merchant_id = ?",
			[]any{id, end, exp, m}); err != nil {
			return fmt.Errorf("ledger: move the head of %s: %w", m, err)
		}
	}
	return nil
}

func (s *Store) upsertGrants(ctx context.Context, tx *sql.Tx, grants []Grant) error {
	if len(grants) == 0 {
		return nil
	}
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	args := make([]any, 0, 11*len(grants))
	for _, g := range grants {
		var exp, ended any
		if g.ExpiresAt != nil {
			exp = *g.ExpiresAt
		}
		if g.EndedAt != nil {
			ended = *g.EndedAt
		}
		args = append(args, g.ID, g.MerchantID, g.Amount, g.Remaining, g.Priority, g.StartsAt, exp, g.RolloverMax, string(g.State), g.CreatedAt, ended)
	}
	q := "INSERT INTO quota_grants (" + grantColumns + ") VALUES " + tuple + strings.Repeat(", "+tuple, len(grants)-1) +
		" ON DUPLICATE KEY UPDATE remaining = VALUES(remaining), state = VALUES(state), ended_at = VALUES(ended_at)"
	if _, err := s.exec(ctx, tx, q, args); err != nil {
		return fmt.Errorf("ledger: write %d grant(s): %w", len(grants), err)
	}
	return nil
}

// attribution is one row of quota_attribution.
type attribution struct {
	eventID string
	part    Part
}

// burn names the grant that paid each debit of rows. A merchant whose head
// grant paid the whole batch (paidByHead) costs nothing more: its rows name
// the head. The others' grants are locked, the batch attributed in burn-down
// order (Attribute), the grants and the head written back, and the debits
// that more than one grant paid (or partly owed) listed in quota_attribution.
// bals are after the guarded UPDATE; debits what the batch debited.
func (s *Store) burn(ctx context.Context, tx *sql.Tx, rows []Row, bals []Balance, debits map[string]int64, now time.Time) error {
	var slow []Balance
	heads := make(map[string]*string, len(bals))
	for _, b := range bals {
		if debits[b.MerchantID] <= 0 {
			continue
		}
		if paidByHead(b) {
			heads[b.MerchantID] = b.HeadGrant
		} else {
			slow = append(slow, b)
		}
	}
	for i := range rows {
		rows[i].GrantID = nil
		if rows[i].Kind == KindDebit {
			rows[i].GrantID = heads[rows[i].MerchantID]
		}
	}
	if len(slow) == 0 {
		return nil
	}
	before := make(map[string]int64, len(slow))
	after := make(map[string]int64, len(slow))
	for _, b := range slow {
		before[b.MerchantID] = b.Debited - debits[b.MerchantID]
		after[b.MerchantID] = b.Debited
	}
	books, err := s.loadBooks(ctx, tx, slow, before)
	if err != nil {
		return err
	}
	amounts := make(map[string][]int64, len(slow))
	at := make(map[string][]int, len(slow))
	for i, r := range rows {
		if _, ok := books[r.MerchantID]; ok && r.Kind == KindDebit {
			amounts[r.MerchantID] = append(amounts[r.MerchantID], r.Amount)
			at[r.MerchantID] = append(at[r.MerchantID], i)
		}
	}
	var split []attribution
	for m, bk := range books {
		bk.adopt(bk.bal.Available()+debits[m], now)
		for k, parts := range Attribute(bk.grants, amounts[m]) {
			i := at[m][k]
			if len(parts) == 1 && parts[0].GrantID != "" {
				rows[i].GrantID = &parts[0].GrantID
				continue
			}
			for _, p := range parts {
				if p.GrantID != "" {
					split = append(split, attribution{eventID: rows[i].EventID, part: p})
				}
			}
		}
	}
	if err := s.saveBooks(ctx, tx, books, after, now); err != nil {
		return err
	}
	return s.insertAttribution(ctx, tx, split)
}

func (s *Store) insertAttribution(ctx context.Context, tx *sql.Tx, split []attribution) error {
	if len(split) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(split))
	for _, a := range split {
		args = append(args, a.eventID, a.part.GrantID, a.part.Amount)
	}
	q := "INSERT INTO quota_attribution (event_id, grant_id, amount) VALUES (?, ?, ?)" + strings.Repeat(", (?, ?, ?)", len(split)-1)
	if _, err := s.exec(ctx, tx, q, args); err != nil {
		return fmt.Errorf("ledger: write %d attribution(s): %w", len(split), err)
	}
	return nil
}

// Grants returns the merchants' grants, the active ones (state active) first
// in burn-down order, then the ended ones, newest first, at most limit of
// those (0: none). Remaining is read through RemainingSQL.
func (s *Store) Grants(ctx context.Context, merchants []string, ended int) (map[string][]Grant, error) {
	out := make(map[string][]Grant, len(merchants))
	if len(merchants) == 0 {
		return out, nil
	}
	in, args := sqltx.InList(merchants)
	cols := strings.ReplaceAll("g."+grantColumns, ", ", ", g.")
	cols = strings.Replace(cols, "g.remaining", RemainingSQL, 1)
	q := "SELECT " + cols + " FROM quota_grants g JOIN merchant_balance b ON b.merchant_id = g.merchant_id WHERE g.merchant_id IN (" + in + ")"
	nEnded := map[string]int{}
	var endedRows []Grant
	err := s.query(ctx, s.sql, q+" ORDER BY g.created_at DESC, g.grant_id", args, func(rows *sql.Rows) error {
		g, err := scanGrant(rows)
		if err != nil {
			return err
		}
		if g.State == GrantActive {
			out[g.MerchantID] = append(out[g.MerchantID], g)
		} else if nEnded[g.MerchantID] < ended {
			nEnded[g.MerchantID]++
			endedRows = append(endedRows, g)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: grants: %w", err)
	}
	for m := range out {
		slices.SortFunc(out[m], BurnOrder)
	}
	for _, g := range endedRows {
		out[g.MerchantID] = append(out[g.MerchantID], g)
	}
	return out, nil
}
