package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// DueExpiries lists up to limit merchants with an expiry due by MySQL's
// clock, the earliest first.
func (s *Store) DueExpiries(ctx context.Context, limit int) ([]string, error) {
	return s.merchantIDs(ctx, "SELECT merchant_id FROM merchant_balance WHERE next_expiry <= UTC_TIMESTAMP(6) ORDER BY next_expiry LIMIT ?", []any{limit})
}

// DueAmong lists those of merchants with an expiry due by MySQL's clock.
func (s *Store) DueAmong(ctx context.Context, merchants []string) ([]string, error) {
	if len(merchants) == 0 {
		return nil, nil
	}
	in, args := InList(merchants)
	return s.merchantIDs(ctx, "SELECT merchant_id FROM merchant_balance WHERE merchant_id IN ("+in+") AND next_expiry <= UTC_TIMESTAMP(6) ORDER BY merchant_id", args)
}

func (s *Store) merchantIDs(ctx context.Context, query string, args []any) ([]string, error) {
	var out []string
	err := s.query(ctx, s.sql, query, args, func(rows *sql.Rows) error {
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
	var moved []string
	wrote := false
	err := s.inSQLTxOpts(ctx, readCommitted, func(ctx context.Context, tx *sql.Tx) error {
		moved, wrote = nil, false
		in, args := InList(merchants)
		var bals []Balance
		var now time.Time
		err := s.query(ctx, tx, "SELECT "+balanceColumns+", UTC_TIMESTAMP(6) FROM merchant_balance WHERE merchant_id IN ("+in+") ORDER BY merchant_id FOR UPDATE",
			args, func(rows *sql.Rows) error {
				b, err := scanBalance(rows, &now)
				if err != nil {
					return err
				}
				if b.NextExpiry != nil && !b.NextExpiry.After(now) {
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
		var rows []Row
		var evs []quotaevent.Event
		for _, b := range bals {
			bk := books[b.MerchantID]
			bk.adopt(b.Available(), now)
			out, ended, fresh := expireDue(bk.grants, now)
			bk.grants, bk.ended = out, ended
			for _, g := range fresh {
				bk.add(g)
			}
			mrows := expiryRows(ended, fresh, now)
			for i := range bk.ended {
				bk.ended[i].Remaining = 0
			}
			if len(mrows) == 0 {
				continue
			}
			var taken int64
			var credited int64
			for _, r := range mrows {
				if r.Kind == KindExpire {
					taken += r.Amount
				} else {
					credited += r.Amount
				}
			}
			if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET debited = debited + ?, credited = credited + ? WHERE merchant_id = ?",
				[]any{taken, credited, b.MerchantID}); err != nil {
				return fmt.Errorf("ledger: expire grants of %s: %w", b.MerchantID, err)
			}
			debited[b.MerchantID] += taken
			bal, cred := b.Available(), b.Credited
			for i := range mrows {
				r := &mrows[i]
				c := quotaevent.Change{CausedBy: r.EventID, Before: bal, After: bal - r.Amount, CreditedBefore: cred}
				t := quotaevent.Expired
				if r.Kind == KindCredit {
					c.After, c.Credit, t = bal+r.Amount, true, quotaevent.Granted
					cred += r.Amount
				}
				evs = append(evs, quotaevent.NewEvent(t, b.MerchantID, r.EventID, c.Before, c.After, nil, now))
				after := b
				after.Credited = cred
				evs = append(evs, quotaevent.Crossed(b.MerchantID, c, s.levels(after), now)...)
				bal = c.After
				v := bal
				r.BalanceAfter = &v
			}
			rows = append(rows, mrows...)
			moved = append(moved, b.MerchantID)
		}
		if err := s.saveBooks(ctx, tx, books, debited, now); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		all := make([]int, len(rows))
		for i := range all {
			all[i] = i
		}
		if err := s.assignIDs(rows, all); err != nil {
			return err
		}
		if err := s.insert(ctx, tx, rows); err != nil {
			return err
		}
		wrote = len(evs) > 0
		return writeOutbox(evs, func(q string, args []any) error {
			_, err := s.exec(ctx, tx, q, args)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: expire: %w", err)
	}
	if wrote {
		s.eventsWritten()
	}
	return moved, nil
}

// expireDue splits active grants at now: those still active, those that
// expired (Remaining as it was, State expired), and the rollover grants of
// the expired ones.
func expireDue(grants []Grant, now time.Time) (active, ended, rollovers []Grant) {
	for _, g := range grants {
		if g.ExpiresAt == nil || g.ExpiresAt.After(now) {
			active = append(active, g)
			continue
		}
		if r, ok := Rollover(g); ok {
			r.CreatedAt = now
			rollovers = append(rollovers, r)
		}
		g.State, g.EndedAt = GrantExpired, &now
		ended = append(ended, g)
	}
	return active, ended, rollovers
}

// expiryRows are the ledger rows of expired grants (one expire row per grant
// with a remainder) and of their rollovers (a credit each), in that order.
func expiryRows(ended, rollovers []Grant, now time.Time) []Row {
	var rows []Row
	for _, g := range ended {
		if g.Remaining == 0 {
			continue
		}
		id := g.ID
		rows = append(rows, Row{EventID: ExpireID(g.ID), MerchantID: g.MerchantID, Kind: KindExpire, Amount: g.Remaining,
			Reason: ReasonExpiry, GrantID: &id, OccurredAt: *g.ExpiresAt, CreatedAt: now})
	}
	for _, g := range rollovers {
		id := g.ID
		rows = append(rows, Row{EventID: g.ID, MerchantID: g.MerchantID, Kind: KindCredit, Amount: g.Amount,
			Reason: ReasonRollover, GrantID: &id, OccurredAt: g.StartsAt, CreatedAt: now})
	}
	return rows
}
