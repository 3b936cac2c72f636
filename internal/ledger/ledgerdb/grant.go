package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// Grant records credits once per id, in one transaction: a credit row each
// (event_id = the grant id) and one upsert that adds each merchant's total
// to credited, creating its balance row if needed. A per-credit conflict or
// refused value is in its Credited; a returned error concerns the batch
// (*RefusedError, or transient: nothing written, and calling again is safe).
// The caller holds the merchants' locks.
func (s *Store) Grant(ctx context.Context, credits []ledger.Credit) ([]ledger.Credited, error) {
	now := s.now().UTC()
	want := make([]ledger.Row, len(credits))
	ids := make([]string, 0, len(credits))
	terms := make(map[string]ledger.Credit, len(credits))
	for i, c := range credits {
		if _, ok := terms[c.ID]; !ok {
			terms[c.ID] = c
		}
		want[i] = ledger.Row{EventID: c.ID, MerchantID: c.MerchantID, Kind: ledger.KindCredit, Amount: c.Amount,
			Reason: ledger.ReasonGrant, Source: c.Source, OccurredAt: now, CreatedAt: now}
		ids = append(ids, c.ID)
	}
	var out []ledger.Credited
	err := s.writeOnce(ctx, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		existing, err := s.existingEvents(ctx, prepared{stmts: s.stmts, tx: tx}, ids)
		if err != nil {
			return false, err
		}
		var fresh []ledger.Row
		out, fresh = ledger.DecideCredits(want, existing)
		if len(fresh) == 0 {
			return false, nil
		}
		written, wrote, err := s.writeCredits(ctx, tx, fresh, terms)
		if err != nil {
			return false, err
		}
		byID := make(map[string]ledger.Row, len(written))
		for _, r := range written {
			byID[r.EventID] = r
		}
		for i := range out {
			if r, ok := byID[out[i].Row.EventID]; ok && !errors.Is(out[i].Err, ledger.ErrRefused) {
				out[i].Row = r
			}
		}
		return wrote, nil
	})
	switch {
	case errors.Is(err, ledger.ErrRefused):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("ledger: grant %d credit(s): %w", len(credits), err)
	}
	return out, nil
}

// writeOnce runs fn, which records ids once each and says whether it wrote
// balance events, in a transaction: again once if a concurrent insert of an
// id (not under the caller's lock) failed it; a refused value is a
// *RefusedError.
func (s *Store) writeOnce(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) (bool, error)) error {
	for attempt := 0; ; attempt++ {
		wrote := false // the committed attempt wrote balance events
		err := s.inTx(ctx, sqltx.ReadCommitted, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			wrote, err = fn(ctx, tx)
			return err
		})
		switch {
		case err == nil:
			if wrote {
				s.eventsWritten()
			}
			return nil
		case duplicate(err) && attempt == 0:
			continue
		case refused(err):
			return &ledger.RefusedError{Err: err}
		}
		return err
	}
}

// writeCredits raises each merchant's credited once (in merchant order: no
// deadlock between batches), creating its balance row if needed; takes a
// merchant's billed overage off its balance first (billOverage); gives the rows ids, seq
// numbers and balance_after; records each credit as a grant (terms by id,
// ledger.BookCredits) and moves the merchants' heads; inserts the rows and their balance events.
// It returns the rows written, billed rows first, and whether it wrote any
// event.
func (s *Store) writeCredits(ctx context.Context, tx *sql.Tx, credits []ledger.Row, terms map[string]ledger.Credit) ([]ledger.Row, bool, error) {
	moved, merchants := ledger.TakenTotals(credits)
	counts := ledger.RowCounts(credits)
	args := make([]any, 0, 4*len(merchants))
	for _, m := range merchants {
		args = append(args, m, -moved[m], counts[m], m)
	}
	// A merchant created here may have refunds waiting already (their
	// payments were to come after this grant): it counts them.
	const tuple = "(?, ?, 0, ?, (SELECT COUNT(*) FROM quota_refunds WHERE merchant_id = ? AND state = 'pending'))"
	upsert := "INSERT INTO merchant_balance (merchant_id, credited, debited, seq, refunds_waiting) VALUES " + tuple +
		strings.Repeat(", "+tuple, len(merchants)-1) +
		" ON DUPLICATE KEY UPDATE credited = credited + VALUES(credited), seq = seq + VALUES(seq)"
	if _, err := s.exec(ctx, tx, upsert, args); err != nil {
		return nil, false, fmt.Errorf("ledger: credit %d merchant(s): %w", len(merchants), err)
	}
	bals, err := s.balancesInTx(ctx, tx, merchants)
	if err != nil {
		return nil, false, err
	}
	first := make(map[string]ledger.Row, len(merchants))
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
	slices.SortStableFunc(rows, func(a, b ledger.Row) int { return strings.Compare(a.MerchantID, b.MerchantID) })
	if err := s.assignIDs(rows, freshIDs(rows)); err != nil {
		return nil, false, err
	}
	taken, _ := ledger.TakenTotals(rows)
	ledger.Sequence(rows, bals, taken)
	debited := debitedOf(bals)
	books, err := s.loadBooks(ctx, tx, bals, debited)
	if err != nil {
		return nil, false, err
	}
	ledger.BookCredits(books, rows, taken, terms)
	if err := s.saveBooks(ctx, tx, books, debited, rows[0].CreatedAt); err != nil {
		return nil, false, err
	}
	if err := s.insert(ctx, tx, rows); err != nil {
		return nil, false, err
	}
	evs := s.batchEvents(rows, bals)
	// The base of percentage thresholds is now the balance after the credits
	// (read as it was before them by batchEvents).
	in, ids := sqltx.InList(merchants)
	if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET low_base = credited - debited WHERE merchant_id IN ("+in+")", ids); err != nil {
		return nil, false, fmt.Errorf("ledger: credit %d merchant(s): %w", len(merchants), err)
	}
	return rows, len(evs) > 0, s.writeOutbox(ctx, tx, evs)
}

// billOverage writes the billed rows of the merchants of bals (after their
// credits, which took taken) that are below zero under the overage policy
// (ledger.Billed), keyed by their first credit (firstCredit), onto their
// balances. bals are updated.
func (s *Store) billOverage(ctx context.Context, tx *sql.Tx, bals []ledger.Balance, taken map[string]int64, firstCredit map[string]ledger.Row) ([]ledger.Row, error) {
	var rows []ledger.Row
	for i := range bals {
		b := &bals[i]
		r, ok := ledger.Billed(*b, taken[b.MerchantID], firstCredit[b.MerchantID])
		if !ok {
			continue
		}
		if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET credited = credited + ?, seq = seq + 1 WHERE merchant_id = ?",
			[]any{r.Amount, b.MerchantID}); err != nil {
			return nil, fmt.Errorf("ledger: take the billed overage of %s off its balance: %w", b.MerchantID, err)
		}
		b.Credited, b.Seq = b.Credited+r.Amount, b.Seq+1
		rows = append(rows, r)
	}
	return rows, nil
}
