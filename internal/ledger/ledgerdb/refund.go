package ledgerdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/sqltx"
)

// Refund records refunds once per refund id, in one transaction that locks
// their merchants' balance rows first (as a payment's does, so a payment and
// a refund of it are one order or the other, never both before): a refund of
// a recorded debit is applied (ledger.DecideRefund, ledger.BookRefund: its
// refund rows, the grants it returns to, the merchant's head); one whose
// payment is not recorded waits, pending, for the transaction that records
// it (Commit); one of a rejected payment is void. Per refund: a conflict or
// refused value in its outcome's Err (a refund beyond what the debit left is
// applied for the part within, and its Err names the rest). A returned
// error concerns the batch: *ExpiryDueError (drop the caches, Expire, redo),
// *RefusedError, or transient (nothing written; calling again is safe). The
// caller holds the merchants' locks.
func (s *Store) Refund(ctx context.Context, refunds []ledger.Refund) ([]ledger.RefundOutcome, error) {
	ids := make([]string, len(refunds))
	for i, r := range refunds {
		ids[i] = r.ID
	}
	var out []ledger.RefundOutcome
	var due []string
	err := s.writeOnce(ctx, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		existing, err := s.refundRecords(ctx, tx, "refund_id", ids, "")
		if err != nil {
			return false, err
		}
		var fresh []int
		out, fresh = ledger.DecideRefunds(refunds, existing)
		// A refund delivered again while it waits settles now if its payment
		// is recorded by now (of another merchant, say: a conflict no
		// payment's transaction looks for).
		var again []ledger.RefundRecord
		var merchants []string
		for _, o := range out {
			if o.Duplicate && o.Record.State == ledger.RefundPending && !slices.ContainsFunc(again, func(r ledger.RefundRecord) bool { return r.ID == o.Record.ID }) {
				again = append(again, o.Record)
				merchants = append(merchants, o.Record.MerchantID)
			}
		}
		if len(fresh)+len(again) == 0 {
			return false, nil
		}
		for _, i := range fresh {
			merchants = append(merchants, refunds[i].MerchantID)
		}
		merchants = slices.Compact(slices.Sorted(slices.Values(merchants)))
		var bals []ledger.Balance
		bals, due, err = s.lockBalances(ctx, tx, merchants)
		if err != nil || len(due) > 0 {
			return false, err
		}
		settled, bals, err := s.settleAgain(ctx, tx, again, bals, out)
		if err != nil {
			return false, err
		}
		return s.recordRefunds(ctx, tx, refunds, fresh, out, bals, settled)
	})
	switch {
	case errors.Is(err, ledger.ErrRefused):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("ledger: refund %d refund(s): %w", len(refunds), err)
	case len(due) > 0:
		return nil, &ledger.ExpiryDueError{Merchants: due}
	}
	return out, nil
}

// settleAgain settles the waiting refunds delivered again (again) whose
// payment is recorded now (settleWaiting), updating their outcomes' records,
// and returns the refund rows it wrote and the balances after them.
func (s *Store) settleAgain(ctx context.Context, tx *sql.Tx, again []ledger.RefundRecord, bals []ledger.Balance, out []ledger.RefundOutcome) ([]ledger.Row, []ledger.Balance, error) {
	if len(again) == 0 {
		return nil, bals, nil
	}
	events := make([]string, len(again))
	for i, r := range again {
		events[i] = r.EventID
	}
	payments, err := s.paymentRows(ctx, tx, events)
	if err != nil {
		return nil, nil, err
	}
	recorded := slices.DeleteFunc(again, func(r ledger.RefundRecord) bool { _, ok := payments[r.EventID]; return !ok })
	if len(recorded) == 0 {
		return nil, bals, nil
	}
	rows, bals, applied, err := s.settleWaiting(ctx, tx, recorded, payments, bals)
	if err != nil {
		return nil, nil, err
	}
	now := map[string]ledger.RefundRecord{}
	for _, r := range recorded {
		now[r.ID] = ledger.RefundRecord{Refund: r.Refund, State: ledger.RefundVoid, CreatedAt: r.CreatedAt}
	}
	for _, r := range applied {
		now[r.ID] = r
	}
	for i := range out {
		if r, ok := now[out[i].Record.ID]; ok && out[i].Duplicate {
			out[i].Record = r
		}
	}
	return rows, bals, nil
}

// recordRefunds records the fresh refunds (out is updated): applied, pending
// or void by what their payments' rows say, and returns whether it wrote
// balance events (of its rows, after settled: the rows settleAgain wrote).
// bals are the merchants' balance rows, locked.
func (s *Store) recordRefunds(ctx context.Context, tx *sql.Tx, refunds []ledger.Refund, fresh []int, out []ledger.RefundOutcome, bals []ledger.Balance, settled []ledger.Row) (bool, error) {
	events := make([]string, len(fresh))
	for k, i := range fresh {
		events[k] = refunds[i].EventID
	}
	payments := map[string]ledger.Row{}
	if len(events) > 0 {
		var err error
		if payments, err = s.paymentRows(ctx, tx, events); err != nil {
			return false, err
		}
	}
	now := s.now().UTC()
	var apply []ledger.Refund
	var at []int
	var records []ledger.RefundRecord
	for _, i := range fresh {
		r := refunds[i]
		rec := ledger.RefundRecord{Refund: r, State: ledger.RefundPending, CreatedAt: now}
		p, recorded := payments[r.EventID]
		if recorded {
			ok, void, note, err := ledger.JudgePayment(r, p)
			switch {
			case err != nil:
				out[i].Err = err
				continue
			case void:
				rec.State, rec.Note, rec.SettledAt = ledger.RefundVoid, note, &now
			case ok:
				apply, at = append(apply, r), append(at, i)
				continue
			}
		}
		out[i].Record = rec
		records = append(records, rec)
	}
	rows, applied, bals, err := s.applyRefunds(ctx, tx, apply, payments, bals, now)
	if err != nil {
		return false, err
	}
	for k, rec := range applied {
		i := at[k]
		rec.CreatedAt = now
		out[i].Record = rec
		if rec.Beyond > 0 {
			out[i].Err = ledger.BeyondError(rec.Refund, refundedOf(rec))
		}
		records = append(records, rec)
	}
	if err := s.insertRefunds(ctx, tx, records); err != nil {
		return false, err
	}
	waiting := map[string]int64{}
	for _, rec := range records {
		if rec.State == ledger.RefundPending {
			waiting[rec.MerchantID]++
		}
	}
	if err := s.countWaiting(ctx, tx, waiting); err != nil {
		return false, err
	}
	evs := s.batchEvents(append(settled, rows...), bals)
	if err := s.billedBase(ctx, tx, append(settled, rows...)); err != nil {
		return false, err
	}
	return len(evs) > 0, s.writeOutbox(ctx, tx, evs)
}

// billedBase sets the base of percentage thresholds after refund rows that
// billed overage (ledger.RowEvents: a billed row starts a base, a refund row
// keeps it), after their events were computed from the base before.
func (s *Store) billedBase(ctx context.Context, tx *sql.Tx, rows []ledger.Row) error {
	base := map[string]int64{}
	for _, r := range rows {
		if r.Kind == ledger.KindBilled && r.BalanceAfter != nil {
			base[r.MerchantID] = *r.BalanceAfter
		}
	}
	for _, m := range slices.Sorted(maps.Keys(base)) {
		if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET low_base = ? WHERE merchant_id = ?", []any{base[m], m}); err != nil {
			return fmt.Errorf("ledger: base of %s after a refund: %w", m, err)
		}
	}
	return nil
}

func refundedOf(rec ledger.RefundRecord) ledger.Refunded {
	return ledger.Refunded{Taken: rec.Taken, Expired: rec.Expired, Billed: rec.Billed, Beyond: rec.Beyond}
}

// settlePending applies, in the transaction that records rows (a payment
// batch, inserted), the refunds that wait for those of them named by ids
// (waitingFor): a debit's are applied (and the row's Refunded set), a
// rejection's voided. It returns the refund rows written and the balances
// after them (bals: after rows).
func (s *Store) settlePending(ctx context.Context, tx *sql.Tx, rows []ledger.Row, ids []string, bals []ledger.Balance) ([]ledger.Row, []ledger.Balance, error) {
	byEvent := make(map[string]int, len(rows))
	for i, r := range rows {
		byEvent[r.EventID] = i
	}
	pending, err := s.refundRecords(ctx, prepared{stmts: s.stmts, tx: tx}, "event_id", ids, " AND state = 'pending' FOR UPDATE")
	if err != nil || len(pending) == 0 {
		return nil, bals, err
	}
	waiting := slices.SortedFunc(func(yield func(ledger.RefundRecord) bool) {
		for _, p := range pending {
			if !yield(p) {
				return
			}
		}
	}, func(a, b ledger.RefundRecord) int {
		// In the order they arrived: partial refunds add up the same way.
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	payments := make(map[string]ledger.Row, len(waiting))
	for _, w := range waiting {
		payments[w.EventID] = rows[byEvent[w.EventID]]
	}
	refundRows, bals, applied, err := s.settleWaiting(ctx, tx, waiting, payments, bals)
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range applied {
		rows[byEvent[rec.EventID]].Refunded += rec.Returned
	}
	return refundRows, bals, nil
}

// settleWaiting settles pending refunds (in the order given) whose payments
// are recorded (payments, by event id): a debit of their merchant is
// refunded, a rejection voids them, and a row of another merchant (or no
// payment) voids them with the conflict as their note, since a refund that
// waited can no longer be dead-lettered. It returns the refund rows written,
// the balances after them (bals: the merchants', locked) and the refunds
// applied.
func (s *Store) settleWaiting(ctx context.Context, tx *sql.Tx, waiting []ledger.RefundRecord, payments map[string]ledger.Row, bals []ledger.Balance) ([]ledger.Row, []ledger.Balance, []ledger.RefundRecord, error) {
	now := s.now().UTC()
	var apply []ledger.Refund
	var done []ledger.RefundRecord
	for _, w := range waiting {
		ok, void, note, err := ledger.JudgePayment(w.Refund, payments[w.EventID])
		switch {
		case ok:
			apply = append(apply, w.Refund)
			continue
		case void:
			w.State, w.Note = ledger.RefundVoid, note
		default:
			w.State, w.Note = ledger.RefundVoid, err.Error()
		}
		w.SettledAt = &now
		done = append(done, w)
	}
	refundRows, applied, bals, err := s.applyRefunds(ctx, tx, apply, payments, bals, now)
	if err != nil {
		return nil, nil, nil, err
	}
	settled := map[string]int64{}
	for i, rec := range applied {
		if rec.Beyond > 0 {
			applied[i].Note = ledger.BeyondError(rec.Refund, refundedOf(rec)).Error()
		}
	}
	for _, rec := range append(done, applied...) {
		settled[rec.MerchantID]--
	}
	if err := s.countWaiting(ctx, tx, settled); err != nil {
		return nil, nil, nil, err
	}
	return refundRows, bals, applied, s.updateRefunds(ctx, tx, append(done, applied...))
}

// countWaiting moves the merchants' refunds_waiting by delta (never below 0).
func (s *Store) countWaiting(ctx context.Context, tx *sql.Tx, delta map[string]int64) error {
	if len(delta) == 0 {
		return nil
	}
	merchants := slices.Sorted(maps.Keys(delta))
	by, byArgs := caseOf(merchants, delta)
	in, inArgs := sqltx.InList(merchants)
	if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET refunds_waiting = GREATEST(0, refunds_waiting + "+by+") WHERE merchant_id IN ("+in+")",
		append(byArgs, inArgs...)); err != nil {
		return fmt.Errorf("ledger: count waiting refunds: %w", err)
	}
	return nil
}

// applyRefunds applies refunds of recorded debits (payments, by event id;
// their burn is read from them and quota_attribution) to the merchants'
// balances (bals, locked: returned as they are after), in order, and inserts
// their rows. It returns the rows and each refund's record (applied).
func (s *Store) applyRefunds(ctx context.Context, tx *sql.Tx, refunds []ledger.Refund, payments map[string]ledger.Row, bals []ledger.Balance, now time.Time) ([]ledger.Row, []ledger.RefundRecord, []ledger.Balance, error) {
	if len(refunds) == 0 {
		return nil, nil, bals, nil
	}
	var mine []ledger.Balance
	for _, b := range bals {
		if slices.ContainsFunc(refunds, func(r ledger.Refund) bool { return r.MerchantID == b.MerchantID }) {
			mine = append(mine, b)
		}
	}
	books, err := s.loadBooks(ctx, tx, mine, debitedOf(mine))
	if err != nil {
		return nil, nil, nil, err
	}
	events := make([]string, 0, len(refunds))
	for _, r := range refunds {
		events = append(events, r.EventID)
	}
	burns, err := s.burns(ctx, tx, events, payments, books)
	if err != nil {
		return nil, nil, nil, err
	}
	taken, err := s.refundedSoFar(ctx, tx, events)
	if err != nil {
		return nil, nil, nil, err
	}
	var rows []ledger.Row
	var parts []any // refund_id, grant_id, amount of each grant part returned
	records := make([]ledger.RefundRecord, len(refunds))
	for k, r := range refunds {
		bk, p := books[r.MerchantID], payments[r.EventID]
		if bk == nil {
			return nil, nil, nil, fmt.Errorf("ledger: refund %s: merchant %s has no balance row", r.ID, r.MerchantID)
		}
		var outstanding int64
		if bk.Balance.PolicyKind == ledger.PolicyOverage {
			outstanding = max(0, -bk.Balance.Available())
		}
		d := ledger.DecideRefund(burns[r.EventID], taken[r.EventID], r.Amount, outstanding, endedIn(bk, now))
		taken[r.EventID] += d.Taken
		tmpl := ledger.Row{EventID: ledger.RefundRowID(r.ID), MerchantID: r.MerchantID, Reason: r.Reason,
			PaymentID: p.PaymentID, Source: p.Source, OccurredAt: r.OccurredAt, CreatedAt: now}
		if d.Total() > 0 {
			for _, row := range ledger.BookRefund(bk, d, tmpl, now) {
				bk.Balance.Credited += row.Amount
				rows = append(rows, row)
			}
		}
		for _, p := range d.Returned {
			if p.GrantID != "" {
				parts = append(parts, r.ID, p.GrantID, p.Amount)
			}
		}
		records[k] = ledger.RefundRecord{Refund: r, State: ledger.RefundApplied, Taken: d.Taken, Returned: d.Total(),
			Expired: d.Expired, Billed: d.Billed, Beyond: d.Beyond, CreatedAt: now, SettledAt: &now}
	}
	if len(rows) == 0 {
		return nil, records, bals, nil
	}
	credits, merchants := ledger.TakenTotals(rows)
	for m := range credits {
		credits[m] = -credits[m]
	}
	credit, creditArgs := caseOf(merchants, credits)
	count, countArgs := caseOf(merchants, ledger.RowCounts(rows))
	in, inArgs := sqltx.InList(merchants)
	if _, err := s.exec(ctx, tx, "UPDATE merchant_balance SET credited = credited + "+credit+", seq = seq + "+count+" WHERE merchant_id IN ("+in+")",
		append(append(creditArgs, countArgs...), inArgs...)); err != nil {
		return nil, nil, nil, fmt.Errorf("ledger: credit %d refund row(s): %w", len(rows), err)
	}
	after, err := s.balancesInTx(ctx, tx, ledgerMerchants(bals))
	if err != nil {
		return nil, nil, nil, err
	}
	if err := s.assignIDs(rows, freshIDs(rows)); err != nil {
		return nil, nil, nil, err
	}
	minus, _ := ledger.TakenTotals(rows)
	ledger.Sequence(rows, after, minus)
	if err := s.saveBooks(ctx, tx, books, debitedOf(after), now); err != nil {
		return nil, nil, nil, err
	}
	if err := s.insert(ctx, tx, rows); err != nil {
		return nil, nil, nil, err
	}
	if len(parts) > 0 {
		q := "INSERT INTO quota_refund_parts (refund_id, grant_id, amount) VALUES (?, ?, ?)" + strings.Repeat(", (?, ?, ?)", len(parts)/3-1)
		if _, err := s.exec(ctx, tx, q, parts); err != nil {
			return nil, nil, nil, fmt.Errorf("ledger: write %d refund part(s): %w", len(parts)/3, err)
		}
	}
	return rows, records, after, nil
}

func ledgerMerchants(bals []ledger.Balance) []string {
	out := make([]string, len(bals))
	for i, b := range bals {
		out[i] = b.MerchantID
	}
	return out
}

// endedIn says which grants a refund cannot return to: not in the book
// (unknown), expired or revoked, or past their expiry at now.
func endedIn(bk *ledger.Book, now time.Time) func(string) bool {
	return func(id string) bool {
		i := slices.IndexFunc(bk.Grants, func(g ledger.Grant) bool { return g.ID == id })
		if i < 0 {
			return true
		}
		g := bk.Grants[i]
		return g.State == ledger.GrantExpired || g.ExpiresAt != nil && !g.ExpiresAt.After(now)
	}
}

// burns reads what each payment of events took (its row's grant, or its
// quota_attribution parts, in burn-down order), and puts the grants it burned
// that are no longer active into the books (locked), for a refund to return
// to or to find ended.
func (s *Store) burns(ctx context.Context, tx *sql.Tx, events []string, payments map[string]ledger.Row, books map[string]*ledger.Book) (map[string]ledger.Burn, error) {
	out := make(map[string]ledger.Burn, len(events))
	parts := make(map[string][]ledger.Part, len(events))
	var split []string
	for _, e := range events {
		p := payments[e]
		if p.GrantID != nil {
			parts[e] = []ledger.Part{{GrantID: *p.GrantID, Amount: p.Amount}}
		} else {
			split = append(split, e)
		}
	}
	if len(split) > 0 {
		in, args := sqltx.InList(split)
		err := s.query(ctx, tx, "SELECT event_id, grant_id, amount FROM quota_attribution WHERE event_id IN ("+in+")", args,
			func(rows *sql.Rows) error {
				var e string
				var p ledger.Part
				if err := rows.Scan(&e, &p.GrantID, &p.Amount); err != nil {
					return err
				}
				parts[e] = append(parts[e], p)
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("ledger: read attributions: %w", err)
		}
	}
	var missing []string
	for e, ps := range parts {
		bk := books[payments[e].MerchantID]
		for _, p := range ps {
			if bk != nil && !slices.ContainsFunc(bk.Grants, func(g ledger.Grant) bool { return g.ID == p.GrantID }) && !slices.Contains(missing, p.GrantID) {
				missing = append(missing, p.GrantID)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		in, args := sqltx.InList(missing)
		err := s.query(ctx, tx, "SELECT "+grantColumns+" FROM quota_grants WHERE grant_id IN ("+in+") AND state <> 'active' FOR UPDATE", args,
			func(rows *sql.Rows) error {
				g, err := scanGrant(rows)
				if err == nil && books[g.MerchantID] != nil {
					books[g.MerchantID].Read(g, books[g.MerchantID].Balance.Debited)
				}
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("ledger: read burned grants: %w", err)
		}
		for _, bk := range books {
			bk.Sort()
		}
	}
	for _, e := range events {
		p := payments[e]
		ps := parts[e]
		if bk := books[p.MerchantID]; bk != nil {
			order := func(id string) int {
				return slices.IndexFunc(bk.Grants, func(g ledger.Grant) bool { return g.ID == id })
			}
			slices.SortStableFunc(ps, func(a, b ledger.Part) int { return order(a.GrantID) - order(b.GrantID) })
		}
		out[e] = ledger.Burn{Amount: p.Amount, Parts: ps, Overage: p.Overage}
	}
	return out, nil
}

// refundedSoFar sums what the applied refunds of each payment of events took.
func (s *Store) refundedSoFar(ctx context.Context, tx *sql.Tx, events []string) (map[string]int64, error) {
	out := make(map[string]int64, len(events))
	in, args := sqltx.InList(slices.Compact(slices.Sorted(slices.Values(events))))
	err := s.query(ctx, tx, "SELECT event_id, SUM(taken) FROM quota_refunds WHERE event_id IN ("+in+") AND state = 'applied' GROUP BY event_id", args,
		func(rows *sql.Rows) error {
			var e string
			var n int64
			err := rows.Scan(&e, &n)
			out[e] = n
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: refunds so far: %w", err)
	}
	return out, nil
}

// lockBalances locks the balance rows of merchants (sorted) in key order and
// returns them, and the merchants among them whose grants are due to expire
// (by MySQL's clock, as the payment's guard).
func (s *Store) lockBalances(ctx context.Context, tx *sql.Tx, merchants []string) ([]ledger.Balance, []string, error) {
	in, args := sqltx.InList(merchants)
	var bals []ledger.Balance
	var due []string
	err := s.query(ctx, tx, "SELECT "+balanceColumns+", COALESCE(next_expiry <= UTC_TIMESTAMP(6), 0) FROM merchant_balance FORCE INDEX (PRIMARY) WHERE merchant_id IN ("+in+") ORDER BY merchant_id FOR UPDATE",
		args, func(rows *sql.Rows) error {
			var isDue bool
			b, err := scanBalance(rows, &isDue)
			if err != nil {
				return err
			}
			bals = append(bals, b)
			if isDue {
				due = append(due, b.MerchantID)
			}
			return nil
		})
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: lock balances: %w", err)
	}
	return bals, due, nil
}

// paymentRows reads the ledger rows of events, with what a refund needs of them.
func (s *Store) paymentRows(ctx context.Context, tx *sql.Tx, events []string) (map[string]ledger.Row, error) {
	out := make(map[string]ledger.Row, len(events))
	in, args := sqltx.InList(events)
	err := s.query(ctx, tx, "SELECT event_id, merchant_id, kind, amount, reason, payment_id, source, overage, grant_id FROM quota_ledger WHERE event_id IN ("+in+")", args,
		func(rows *sql.Rows) error {
			var r ledger.Row
			if err := rows.Scan(&r.EventID, &r.MerchantID, &r.Kind, &r.Amount, &r.Reason, &r.PaymentID, &r.Source, &r.Overage, &r.GrantID); err != nil {
				return err
			}
			out[r.EventID] = r
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: read payments: %w", err)
	}
	return out, nil
}

const refundColumns = "refund_id, event_id, merchant_id, amount, reason, occurred_at, state, taken, returned, expired, billed, beyond, note, created_at, settled_at"

// refundRecords reads the quota_refunds rows whose column (refund_id or
// event_id) is one of values, and more (a condition, a locking clause),
// by refund id.
func (s *Store) refundRecords(ctx context.Context, c conn, column string, values []string, more string) (map[string]ledger.RefundRecord, error) {
	out := make(map[string]ledger.RefundRecord)
	for off := 0; off < len(values); off += maxInList {
		in, args := sqltx.InList(padPow2(values[off:min(off+maxInList, len(values))]))
		err := s.query(ctx, c, "SELECT "+refundColumns+" FROM quota_refunds WHERE "+column+" IN ("+in+")"+more, args,
			func(rows *sql.Rows) error {
				r, err := scanRefund(rows)
				out[r.ID] = r
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("ledger: read refunds: %w", err)
		}
	}
	return out, nil
}

func scanRefund(rows *sql.Rows) (ledger.RefundRecord, error) {
	var r ledger.RefundRecord
	var settled sql.NullTime
	err := rows.Scan(&r.ID, &r.EventID, &r.MerchantID, &r.Amount, &r.Reason, &r.OccurredAt, &r.State, &r.Taken, &r.Returned,
		&r.Expired, &r.Billed, &r.Beyond, &r.Note, &r.CreatedAt, &settled)
	r.OccurredAt, r.CreatedAt = r.OccurredAt.UTC(), r.CreatedAt.UTC()
	if settled.Valid {
		t := settled.Time.UTC()
		r.SettledAt = &t
	}
	return r, err
}

func refundArgs(r ledger.RefundRecord) []any {
	return []any{r.ID, r.EventID, r.MerchantID, r.Amount, r.Reason, r.OccurredAt, string(r.State), r.Taken, r.Returned,
		r.Expired, r.Billed, r.Beyond, r.Note, r.CreatedAt, r.SettledAt}
}

// insertRefunds inserts fresh quota_refunds rows (a second of one id fails).
func (s *Store) insertRefunds(ctx context.Context, tx *sql.Tx, recs []ledger.RefundRecord) error {
	if len(recs) == 0 {
		return nil
	}
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var args []any
	for _, r := range recs {
		args = append(args, refundArgs(r)...)
	}
	if _, err := s.exec(ctx, tx, "INSERT INTO quota_refunds ("+refundColumns+") VALUES "+tuple+strings.Repeat(", "+tuple, len(recs)-1), args); err != nil {
		return fmt.Errorf("ledger: record %d refund(s): %w", len(recs), err)
	}
	return nil
}

// updateRefunds writes what became of refunds that were pending.
func (s *Store) updateRefunds(ctx context.Context, tx *sql.Tx, recs []ledger.RefundRecord) error {
	for _, r := range recs {
		if _, err := s.exec(ctx, tx, "UPDATE quota_refunds SET state = ?, taken = ?, returned = ?, expired = ?, billed = ?, beyond = ?, note = ?, settled_at = ? WHERE refund_id = ?",
			[]any{string(r.State), r.Taken, r.Returned, r.Expired, r.Billed, r.Beyond, r.Note, r.SettledAt, r.ID}); err != nil {
			return fmt.Errorf("ledger: settle refund %s: %w", r.ID, err)
		}
	}
	return nil
}

// ErrNotPending: the refund to cancel is not pending (unknown, or settled).
var ErrNotPending = errors.New("ledger: refund is not pending")

// CancelRefund cancels a pending refund (its payment never came), with the
// operator's note: it will not apply when the payment is recorded.
func (s *Store) CancelRefund(ctx context.Context, refundID, note string) error {
	err := s.inTx(ctx, sqltx.ReadCommitted, func(ctx context.Context, tx *sql.Tx) error {
		recs, err := s.refundRecords(ctx, tx, "refund_id", []string{refundID}, " AND state = 'pending' FOR UPDATE")
		switch {
		case err != nil:
			return err
		case len(recs) == 0:
			return fmt.Errorf("%w: %s", ErrNotPending, refundID)
		}
		if _, err := s.exec(ctx, tx, "UPDATE quota_refunds SET state = 'cancelled', note = ?, settled_at = UTC_TIMESTAMP(6) WHERE refund_id = ?",
			[]any{note, refundID}); err != nil {
			return err
		}
		return s.countWaiting(ctx, tx, map[string]int64{recs[refundID].MerchantID: -1})
	})
	if err != nil && !errors.Is(err, ErrNotPending) {
		return fmt.Errorf("ledger: cancel refund %s: %w", refundID, err)
	}
	return err
}

// Refunds lists refunds: of one payment (eventID set), or those pending
// (pending), oldest first, at most limit.
func (s *Store) Refunds(ctx context.Context, eventID string, pending bool, limit int) ([]ledger.RefundRecord, error) {
	q := "SELECT " + refundColumns + " FROM quota_refunds WHERE "
	var args []any
	switch {
	case eventID != "":
		q += "event_id = ?"
		args = append(args, eventID)
	case pending:
		q += "state = 'pending'"
	default:
		q += "TRUE"
	}
	q += " ORDER BY created_at, refund_id LIMIT ?"
	var out []ledger.RefundRecord
	err := s.query(ctx, s.db, q, append(args, limit), func(rows *sql.Rows) error {
		r, err := scanRefund(rows)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: refunds: %w", err)
	}
	return out, nil
}

// RefundedAmong lists the merchants of the payments among eventIDs that
// refunds gave quota back to.
func (s *Store) RefundedAmong(ctx context.Context, eventIDs []string) ([]string, error) {
	in, args := sqltx.InList(eventIDs)
	return s.merchantIDs(ctx, "SELECT DISTINCT merchant_id FROM quota_refunds WHERE event_id IN ("+in+") AND state = 'applied' AND returned > 0 ORDER BY merchant_id", args)
}

// PaymentRefunds returns the refunds of the payment eventID read on q (the
// pool, or a caller's snapshot), oldest first; never nil.
func PaymentRefunds(ctx context.Context, q sqltx.Querier, eventID string) ([]ledger.RefundRecord, error) {
	out := []ledger.RefundRecord{}
	_, err := sqltx.Each(ctx, q, "SELECT "+refundColumns+" FROM quota_refunds WHERE event_id = ? ORDER BY created_at, refund_id", []any{eventID},
		func(rows *sql.Rows) error {
			r, err := scanRefund(rows)
			out = append(out, r)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: refunds of %s: %w", eventID, err)
	}
	return out, nil
}

// PendingAges returns the age of every pending refund, by MySQL's clock (a
// metric's source).
func (s *Store) PendingAges(ctx context.Context) ([]time.Duration, error) {
	var out []time.Duration
	err := s.query(ctx, s.db, "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)) FROM quota_refunds WHERE state = 'pending'", nil,
		func(rows *sql.Rows) error {
			var us int64
			err := rows.Scan(&us)
			out = append(out, time.Duration(us)*time.Microsecond)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: pending refunds: %w", err)
	}
	return out, nil
}
