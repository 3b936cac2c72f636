package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/sqltx"
)

// Credit is one grant to record: ID is the grant id, the row's event_id.
// Priority orders it in the burn-down (lower first; callers give
// DefaultPriority when they have none); ExpiresAt nil never expires;
// RolloverMax carries up to that much past its expiry. StartsAt, when set,
// is the start of the period it is for (a plan's); else the time it is recorded.
type Credit struct {
	ID, MerchantID, Source string
	Amount                 int64
	Priority               int
	ExpiresAt              *time.Time
	RolloverMax            int64
	StartsAt               time.Time
}

// Credited is what became of one Credit.
type Credited struct {
	Row       Row   // the credit row as recorded, by this call or an earlier one
	Duplicate bool  // the id was recorded before (or earlier in the batch) with the same merchant and amount
	Err       error // wraps ErrConflict, or a *RefusedError: nothing was written for it
}

// Grant records credits once per id, in one transaction: a credit row each
// (event_id = the grant id) and one upsert that adds each merchant's total
// to credited, creating its balance row if needed. A per-credit conflict or
// refused value is in its Credited; a returned error concerns the batch
// (*RefusedError, or transient: nothing written, and calling again is safe).
// The caller holds the merchants' locks.
func (s *Store) Grant(ctx context.Context, credits []Credit) ([]Credited, error) {
	now := s.now().UTC()
	want := make([]Row, len(credits))
	ids := make([]string, 0, len(credits))
	terms := make(map[string]Credit, len(credits))
	for i, c := range credits {
		if _, ok := terms[c.ID]; !ok {
			terms[c.ID] = c
		}
		want[i] = Row{EventID: c.ID, MerchantID: c.MerchantID, Kind: KindCredit, Amount: c.Amount,
			Reason: ReasonGrant, Source: c.Source, OccurredAt: now, CreatedAt: now}
		ids = append(ids, c.ID)
	}
	// A concurrent insert of an id (not under our lock) fails the first attempt.
	for attempt := 0; ; attempt++ {
		var out []Credited
		wrote := false // the committed attempt wrote balance events
		err := s.inSQLTxOpts(ctx, sqltx.ReadCommitted, func(ctx context.Context, tx *sql.Tx) error {
			existing, err := s.existingEvents(ctx, prepared{stmts: s.stmts, tx: tx}, ids)
			if err != nil {
				return err
			}
			var fresh []Row
			out, fresh = decideCredits(want, existing)
			if len(fresh) == 0 {
				return nil
			}
			written, w, err := s.writeCredits(ctx, tx, fresh, terms)
			if err != nil {
				return err
			}
			wrote = w
			byID := make(map[string]Row, len(written))
			for _, r := range written {
				byID[r.EventID] = r
			}
			for i := range out {
				if r, ok := byID[out[i].Row.EventID]; ok && !errors.Is(out[i].Err, ErrRefused) {
					out[i].Row = r
				}
			}
			return nil
		})
		switch {
		case err == nil:
			if wrote {
				s.eventsWritten()
			}
			return out, nil
		case duplicate(err) && attempt == 0:
			continue
		case refused(err):
			return nil, &RefusedError{Err: err}
		}
		return nil, fmt.Errorf("ledger: grant %d credit(s): %w", len(credits), err)
	}
}

// decideCredits sorts the wanted credit rows against those recorded before
// (existing) and earlier in the batch: a refused value, a conflict, a
// duplicate, or fresh (returned, in order, to be written).
func decideCredits(want []Row, existing map[string]Row) (out []Credited, fresh []Row) {
	out = make([]Credited, len(want))
	first := make(map[string]Row)
	for i, w := range want {
		out[i].Row = w
		if err := w.Check(); err != nil {
			out[i].Err = &RefusedError{EventID: w.EventID, Err: err}
			continue
		}
		prev, ok := existing[w.EventID]
		if !ok {
			prev, ok = first[w.EventID]
		}
		switch {
		case !ok:
			first[w.EventID] = w
			fresh = append(fresh, w)
		case prev.Kind != KindCredit || prev.MerchantID != w.MerchantID || prev.Amount != w.Amount:
			out[i].Row = prev
			out[i].Err = fmt.Errorf("%w: grant %s is recorded as %s of %d for merchant %s, not credit of %d for %s",
				ErrConflict, w.EventID, prev.Kind, prev.Amount, prev.MerchantID, w.Amount, w.MerchantID)
		default:
			out[i].Row = prev
			out[i].Duplicate = true
		}
	}
	return out, fresh
}

// writeCredits raises each merchant's credited once (in merchant order: no
// deadlock between batches), creating its balance row if needed; takes a
// merchant's billed overage off its balance first (billOverage); gives the rows ids, seq
// numbers and balance_after; records each credit as a grant (terms by id)
// and moves the merchants' heads; inserts the rows and their balance events.
// It returns the rows written, billed rows first, and whether it wrote any
// event.
func (s *Store) writeCredits(ctx context.Context, tx *sql.Tx, credits []Row, terms map[string]Credit) ([]Row, bool, error) {
	moved, merchants := takenTotals(credits)
	counts := rowCounts(credits)
	args := make([]any, 0, 3*len(merchants))
	for _, m := range merchants {
		args = append(args, m, -moved[m], counts[m])
	}
	upsert := "INSERT INTO merchant_balance (merchant_id, credited, debited, seq) VALUES (?, ?, 0, ?)" +
		strings.Repeat(", (?, ?, 0, ?)", len(merchants)-1) +
		" ON DUPLICATE KEY UPDATE credited = credited + VALUES(credited), seq = seq + VALUES(seq)"
	if _, err := s.exec(ctx, tx, upsert, args); err != nil {
		return nil, false, fmt.Errorf("ledger: credit %d merchant(s): %w", len(merchants), err)
	}
	bals, err := s.balancesInTx(ctx, tx, merchants)
	if err != nil {
		return nil, false, err
	}
	first := make(map[string]Row, len(merchants))
	for _, r := range credits {
		if _, seen := first[r.MerchantID]; !seen {
			first[r.MerchantID] = r
		}
	}
	billed, err := s.billOverage(ctx, tx, bals, moved, first)
	if err != nil {
		return nil, false, err
	}
	rows := append(billed, credits...)
	slices.SortStableFunc(rows, func(a, b Row) int { return strings.Compare(a.MerchantID, b.MerchantID) })
	if err := s.assignIDs(rows, freshIDs(rows)); err != nil {
		return nil, false, err
	}
	taken, _ := takenTotals(rows)
	sequence(rows, bals, taken)
	if err := s.bookCredits(ctx, tx, rows, bals, taken, terms); err != nil {
		return nil, false, err
	}
	if err := s.insert(ctx, tx, rows); err != nil {
		return nil, false, err
	}
	evs := s.txEvents(rows, bals)
	// The base of percentage thresholds is now the balance after the credits
	// (read as it was before them by txEvents).
	in, ids := sqltx.InList(merchants)
	if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET low_base = credited - debited WHERE merchant_id IN ("+in+")", ids); err != nil {
		return nil, false, fmt.Errorf("ledger: credit %d merchant(s): %w", len(merchants), err)
	}
	return rows, len(evs) > 0, s.writeOutbox(ctx, tx, evs)
}

// billOverage ends the billed overage of the merchants of bals (after
// their credits, which took taken) that are below zero under the overage
// policy: a billed row each, keyed by its first credit (firstCredit), brings
// the balance back to zero before the credits, so that they are not spent on
// units that are billed; it adds to credited. bals are updated.
func (s *Store) billOverage(ctx context.Context, tx *sql.Tx, bals []Balance, taken map[string]int64, firstCredit map[string]Row) ([]Row, error) {
	var rows []Row
	for i := range bals {
		b := &bals[i]
		owed := -(b.Available() + taken[b.MerchantID])
		if b.PolicyKind != PolicyOverage || owed <= 0 {
			continue
		}
		if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET credited = credited + ?, seq = seq + 1 WHERE merchant_id = ?",
			[]any{owed, b.MerchantID}); err != nil {
			return nil, fmt.Errorf("ledger: take the billed overage of %s off its balance: %w", b.MerchantID, err)
		}
		b.Credited, b.Seq = b.Credited+owed, b.Seq+1
		c := firstCredit[b.MerchantID]
		grant := c.EventID
		rows = append(rows, Row{EventID: BilledID(grant), MerchantID: b.MerchantID, Kind: KindBilled, Amount: owed,
			Reason: ReasonOverage, Source: c.Source, GrantID: &grant, OccurredAt: c.OccurredAt, CreatedAt: c.CreatedAt})
	}
	return rows, nil
}

// bookCredits records credit rows as grants: each pays back what the merchant
// owes first (PayBack; a billed row before them has taken billed overage off),
// then the merchants' heads move. bals are after the rows, which took taken.
func (s *Store) bookCredits(ctx context.Context, tx *sql.Tx, rows []Row, bals []Balance, taken map[string]int64, terms map[string]Credit) error {
	debited := debitedOf(bals)
	books, err := s.loadBooks(ctx, tx, bals, debited)
	if err != nil {
		return err
	}
	avail := make(map[string]int64, len(bals))
	for m, bk := range books {
		avail[m] = bk.bal.Available() + taken[m]
		bk.adopt(avail[m], rows[0].CreatedAt)
	}
	for _, r := range rows {
		bk, ok := books[r.MerchantID]
		if !ok {
			continue
		}
		if r.Kind == KindBilled {
			avail[r.MerchantID] += r.Amount
			continue
		}
		c := terms[r.EventID]
		g := Grant{ID: r.EventID, MerchantID: r.MerchantID, Amount: r.Amount, Remaining: PayBack(avail[r.MerchantID], r.Amount),
			Priority: c.Priority, StartsAt: c.StartsAt, ExpiresAt: c.ExpiresAt, RolloverMax: c.RolloverMax,
			State: GrantActive, CreatedAt: r.CreatedAt}
		if g.StartsAt.IsZero() {
			g.StartsAt = r.CreatedAt
		}
		avail[r.MerchantID] += r.Amount
		bk.add(g)
	}
	return s.saveBooks(ctx, tx, books, debited, rows[0].CreatedAt)
}
