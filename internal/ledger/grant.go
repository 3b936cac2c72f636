package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/quotaevent"
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
		err := s.inSQLTxOpts(ctx, readCommitted, func(ctx context.Context, tx *sql.Tx) error {
			existing, err := s.existingEvents(ctx, prepared{stmts: s.stmts, tx: tx}, ids)
			if err != nil {
				return err
			}
			var fresh []Row
			out, fresh = decideCredits(want, existing)
			if len(fresh) == 0 {
				return nil
			}
			if wrote, err = s.writeCredits(ctx, tx, fresh, terms); err != nil {
				return err
			}
			byID := make(map[string]Row, len(fresh))
			for _, r := range fresh {
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

// writeCredits gives rows ids, raises each merchant's credited once (in
// merchant order: no deadlock between batches), sets balance_after, records
// each as a grant (terms by id) and moves the merchants' heads, inserts the
// rows and their balance events; it reports whether it wrote any event.
func (s *Store) writeCredits(ctx context.Context, tx *sql.Tx, rows []Row, terms map[string]Credit) (bool, error) {
	all := make([]int, len(rows))
	for i := range all {
		all[i] = i
	}
	if err := s.assignIDs(rows, all); err != nil {
		return false, err
	}
	moved, merchants := takenTotals(rows)
	args := make([]any, 0, 2*len(merchants))
	for _, m := range merchants {
		args = append(args, m, -moved[m])
	}
	upsert := "INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES (?, ?, 0)" +
		strings.Repeat(", (?, ?, 0)", len(merchants)-1) + " ON DUPLICATE KEY UPDATE credited = credited + VALUES(credited)"
	if _, err := s.exec(ctx, tx, upsert, args); err != nil {
		return false, fmt.Errorf("ledger: credit %d merchant(s): %w", len(merchants), err)
	}
	bals, err := s.balancesInTx(ctx, tx, merchants)
	if err != nil {
		return false, err
	}
	setBalanceAfter(rows, bals, moved)
	if err := s.bookCredits(ctx, tx, rows, bals, moved, terms); err != nil {
		return false, err
	}
	if err := s.insert(ctx, tx, rows); err != nil {
		return false, err
	}
	evs := s.creditEvents(rows, bals, moved)
	return len(evs) > 0, writeOutbox(evs, func(q string, args []any) error {
		_, err := s.exec(ctx, tx, q, args)
		return err
	})
}

// creditEvents lists the balance events of credit rows in order: each row's
// balance is the merchant's after the batch (bals) less the credits that
// follow it. A merchant that had neither credit nor debit before its first
// grant is new, and a new merchant recovers nothing.
func (s *Store) creditEvents(rows []Row, bals []Balance, moved map[string]int64) []quotaevent.Event {
	at := make(map[string]Balance, len(bals))
	for _, b := range bals {
		b.Credited += moved[b.MerchantID] // moved is negative: what the batch credited
		at[b.MerchantID] = b
	}
	var out []quotaevent.Event
	for _, r := range rows {
		b, known := at[r.MerchantID]
		if !known {
			continue
		}
		created := b.Credited == 0 && b.Debited == 0
		b.Credited += r.Amount
		at[r.MerchantID] = b
		out = append(out, s.grantEvents(r, b, created)...)
	}
	return out
}

// bookCredits records credit rows as grants: each pays back what the merchant
// owes first (PayBack), then the merchants' heads move. bals are after the
// credits; moved is minus what they credited per merchant.
func (s *Store) bookCredits(ctx context.Context, tx *sql.Tx, rows []Row, bals []Balance, moved map[string]int64, terms map[string]Credit) error {
	debited := debitedOf(bals)
	books, err := s.loadBooks(ctx, tx, bals, debited)
	if err != nil {
		return err
	}
	avail := make(map[string]int64, len(bals))
	for m, bk := range books {
		avail[m] = bk.bal.Available() + moved[m]
		bk.adopt(avail[m], rows[0].CreatedAt)
	}
	for _, r := range rows {
		bk, ok := books[r.MerchantID]
		if !ok {
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
