package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// DueExpiries lists up to limit merchants with an expiry due by MySQL's
// clock, the earliest first.
func (s *Store) DueExpiries(ctx context.Context, limit int) ([]string, error) {
	return s.merchantIDs(ctx, "SELECT merchant_id FROM merchant_balance WHERE next_expiry <= UTC_TIMESTAMP(6) ORDER BY next_expiry LIMIT ?", []any{limit})
}

// UntilNextExpiry is how long until the earliest expiry of any merchant by
// MySQL's clock (negative: one is due; an index's first entry); false when
// no merchant has one.
func (s *Store) UntilNextExpiry(ctx context.Context) (time.Duration, bool, error) {
	d, ok, err := sqltx.Until(ctx, s.db, "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(next_expiry)) FROM merchant_balance")
	if err != nil {
		return 0, false, fmt.Errorf("ledger: next expiry: %w", err)
	}
	return d, ok, nil
}

// DueAmong lists those of merchants with an expiry due by MySQL's clock.
func (s *Store) DueAmong(ctx context.Context, merchants []string) ([]string, error) {
	if len(merchants) == 0 {
		return nil, nil
	}
	in, args := sqltx.InList(merchants)
	return s.merchantIDs(ctx, "SELECT merchant_id FROM merchant_balance WHERE merchant_id IN ("+in+") AND next_expiry <= UTC_TIMESTAMP(6) ORDER BY merchant_id", args)
}

func (s *Store) merchantIDs(ctx context.Context, query string, args []any) ([]string, error) {
	var out []string
	err := s.query(ctx, s.db, query, args, func(rows *sql.Rows) error {
		var m string
		if err := rows.Scan(&m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: due expiries: %w", err)
	}
	return out, nil
}

// Expire records, in one transaction, every expiry of the merchants due by
// MySQL's clock: per expired grant with a remainder one expire row keyed by
// the grant (ExpireID: once ever, whoever runs it and however often), its
// rollover grant if any (a credit row keyed by the derived id), a
// quota.expired event; then the merchants' heads move. It returns the
// merchants whose balance moved, whose caches the caller (holding their
// locks) must drop. Concurrent calls serialize on the balance rows; the
// second finds nothing due.
func (s *Store) Expire(ctx context.Context, merchants []string) ([]string, error) {
	if len(merchants) == 0 {
		return nil, nil
	}
	moved, err := s.ending(ctx, merchants, true, func(_ context.Context, _ *sql.Tx, bk *ledger.Book, now time.Time) ([]ledger.Row, error) {
		return bk.Expire(now), nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: expire: %w", err)
	}
	return moved, nil
}

// GrantMerchant is the merchant of grant id; ledger.ErrUnknownGrant when
// there is no such grant.
func (s *Store) GrantMerchant(ctx context.Context, id string) (string, error) {
	ms, err := s.merchantIDs(ctx, "SELECT merchant_id FROM quota_grants WHERE grant_id = ?", []any{id})
	if err == nil && len(ms) == 0 {
		err = fmt.Errorf("%s: %w", id, ledger.ErrUnknownGrant)
	}
	if err != nil {
		return "", err
	}
	return ms[0], nil
}

// Revoke ends grant id of merchant now (ledger.Book.Revoke) in one
// transaction like Expire's, which records the merchant's due expiries
// first: its remainder leaves through the expire row revoke:<id>, once ever.
// It returns the outcome and the amount that left (by an earlier revoke for
// AlreadyRevoked). The caller holds the merchant's locks and drops its caches.
func (s *Store) Revoke(ctx context.Context, merchant, id string) (ledger.RevokeOutcome, int64, error) {
	var outcome ledger.RevokeOutcome
	var amount int64
	_, err := s.ending(ctx, []string{merchant}, false, func(ctx context.Context, tx *sql.Tx, bk *ledger.Book, now time.Time) ([]ledger.Row, error) {
		prev, err := s.existingEvents(ctx, prepared{stmts: s.stmts, tx: tx}, []string{ledger.RevokeID(id)})
		if r, ok := prev[ledger.RevokeID(id)]; ok || err != nil {
			outcome, amount = ledger.AlreadyRevoked, r.Amount
			return nil, err
		}
		rows := bk.Expire(now)
		r, ok := bk.Revoke(id, now)
		if outcome, amount = ledger.NothingLeft, r.Amount; ok {
			outcome, rows = ledger.Revoked, append(rows, r)
		}
		return rows, nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("ledger: revoke %s: %w", id, err)
	}
	if outcome == "" {
		return "", 0, fmt.Errorf("ledger: revoke %s: %s: %w", id, merchant, ledger.ErrUnknownMerchant)
	}
	return outcome, amount, nil
}

// ending is the transaction of Expire and Revoke: it locks the merchants'
// balance rows (only those with an expiry due when dueOnly) and their active
// grants, takes the rows end gives per merchant's book, moves the balances
// and heads, and writes the rows and their events. It returns the merchants
// whose balance moved.
func (s *Store) ending(ctx context.Context, merchants []string, dueOnly bool,
	end func(context.Context, *sql.Tx, *ledger.Book, time.Time) ([]ledger.Row, error)) ([]string, error) {
	var moved []string
	wrote := false
	err := s.inTx(ctx, sqltx.ReadCommitted, func(ctx context.Context, tx *sql.Tx) error {
		moved, wrote = nil, false
		in, args := sqltx.InList(merchants)
		var bals []ledger.Balance
		var now time.Time
		err := s.query(ctx, tx, "SELECT "+balanceColumns+", UTC_TIMESTAMP(6) FROM merchant_balance WHERE merchant_id IN ("+in+") ORDER BY merchant_id FOR UPDATE",
			args, func(rows *sql.Rows) error {
				b, err := scanBalance(rows, &now)
				if err != nil {
					return err
				}
				if !dueOnly || b.NextExpiry != nil && !b.NextExpiry.After(now) {
					bals = append(bals, b)
				}
				return nil
			})
		if err != nil {
			return fmt.Errorf("ledger: read balances to expire: %w", err)
		}
		now = now.UTC()
		if len(bals) == 0 {
			return nil
		}
		debited := debitedOf(bals)
		books, err := s.loadBooks(ctx, tx, bals, debited)
		if err != nil {
			return err
		}
		var rows []ledger.Row
		var after []ledger.Balance // of the merchants with rows, after them (low_base as before)
		for _, b := range bals {
			bk := books[b.MerchantID]
			bk.Adopt(b.Available(), now)
			mrows, err := end(ctx, tx, bk, now)
			if err != nil {
				return err
			}
			if len(mrows) == 0 {
				continue
			}
			t, _ := ledger.TakenTotals(mrows)
			taken, credited := ledger.ExpirySums(mrows)
			if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET debited = debited + ?, credited = credited + ?, seq = seq + ?, low_base = credited - debited WHERE merchant_id = ?",
				[]any{taken, credited, len(mrows), b.MerchantID}); err != nil {
				return fmt.Errorf("ledger: end grants of %s: %w", b.MerchantID, err)
			}
			debited[b.MerchantID] += taken
			b.Debited, b.Credited, b.Seq = b.Debited+taken, b.Credited+credited, b.Seq+int64(len(mrows))
			ledger.Sequence(mrows, []ledger.Balance{b}, t)
			after = append(after, b)
			rows = append(rows, mrows...)
			moved = append(moved, b.MerchantID)
		}
		if err := s.saveBooks(ctx, tx, books, debited, now); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		if err := s.assignIDs(rows, freshIDs(rows)); err != nil {
			return err
		}
		if err := s.insert(ctx, tx, rows); err != nil {
			return err
		}
		evs := s.batchEvents(rows, after)
		wrote = len(evs) > 0
		return s.writeOutbox(ctx, tx, evs)
	})
	if err == nil && wrote {
		s.eventsWritten()
	}
	return moved, err
}
