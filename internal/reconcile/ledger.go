package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
)

// A ledger row may commit up to maxTxAge after taking its id (the ledger's
// promise); slack covers clock skew and a COMMIT finishing after the deadline.
const maxTxAge, slack = ledger.MaxTxAge, 5 * time.Second

// timeShift is where the milliseconds start in a Snowflake id.
const timeShift = idgen.WorkerBits + idgen.SequenceBits

// settledBound is the largest ledger id whose time is at least late+settle
// before now: when late covers the ledger's MaxTxAge and clock skew, no
// commit still to come can insert an id at or below it.
func settledBound(now time.Time, late, settle time.Duration) int64 {
	ms := now.Add(-late-settle).UnixMilli() - idgen.EpochUnixMilli
	if ms < 0 {
		return 0
	}
	return ms<<timeShift | (1<<timeShift - 1)
}

// checkpoint is a reconcile_checkpoints row: the credit and debit sums of a
// merchant's ledger rows with id <= LastID.
type checkpoint struct {
	LastID, Credited, Debited int64
}

// ledgerView is one merchant's balance row and ledger sums, from one snapshot.
type ledgerView struct {
	Balance                     balance
	Base                        checkpoint // zero without a checkpoint, with LedgerFull, or when Stale
	Stale                       bool       // the stored checkpoint lies beyond the bound: ignored, to be overwritten
	SettledCredit, SettledDebit int64      // rows after Base.LastID, at or below the settled bound
	FreshCredit, FreshDebit     int64      // rows above both
	MaxSettled                  int64      // highest settled id read, 0 if none
	// GrantsLeft sums the active grants' remaining; Grants counts the
	// merchant's grants of any state (0: a balance row written by hand,
	// whose balance the next debit adopts as an opening grant).
	GrantsLeft int64
	Grants     int64
}

func (v ledgerView) credits() int64 { return v.Base.Credited + v.SettledCredit + v.FreshCredit }
func (v ledgerView) debits() int64  { return v.Base.Debited + v.SettledDebit + v.FreshDebit }

// next is the checkpoint this view allows, and whether it is worth writing.
func (v ledgerView) next(full bool) (checkpoint, bool) {
	cp := checkpoint{
		LastID:   max(v.Base.LastID, v.MaxSettled),
		Credited: v.Base.Credited + v.SettledCredit,
		Debited:  v.Base.Debited + v.SettledDebit,
	}
	return cp, full || v.Stale || v.MaxSettled > v.Base.LastID
}

// baseOf is what a pass may build on of a stored checkpoint: nothing with
// LedgerFull, and nothing (stale) when it lies beyond the bound, as left by an
// older version or a reconciler with a shorter --settle: a late commit may have
// landed below it, and the bound is what rules that out.
func baseOf(stored checkpoint, bound int64, full bool) (base checkpoint, stale bool) {
	switch {
	case full:
		return checkpoint{}, false
	case stored.LastID > bound:
		return checkpoint{}, true
	}
	return stored, false
}

// readLedger reads the balance rows, checkpoints and new ledger sums of
// merchants in one snapshot, so that no commit falls between them.
func readLedger(ctx context.Context, db *sql.DB, merchants []string, bound int64, full bool) (map[string]ledgerView, error) {
	views := make(map[string]ledgerView, len(merchants))
	err := snapshot(ctx, db, func(tx *sql.Tx) error {
		if err := readBases(ctx, tx, merchants, bound, full, views); err != nil {
			return err
		}
		if err := readGrants(ctx, tx, merchants, views); err != nil {
			return err
		}
		return readSums(ctx, tx, merchants, bound, full, views)
	})
	return views, err
}

func readBases(ctx context.Context, tx *sql.Tx, merchants []string, bound int64, full bool, views map[string]ledgerView) error {
	in, args := ledger.InList(merchants)
	return query(ctx, tx, "read checkpoints", func(rows *sql.Rows) error {
		var m string
		var v ledgerView
		var cp checkpoint
		err := rows.Scan(&m, &v.Balance.Credited, &v.Balance.Debited, &v.Balance.Policy.Kind, &v.Balance.Policy.Floor, &cp.LastID, &cp.Credited, &cp.Debited)
		v.Base, v.Stale = baseOf(cp, bound, full)
		views[m] = v
		return err
	}, `SELECT b.merchant_id, b.credited, b.debited, b.overdraft_policy, b.overdraft_floor,
		COALESCE(c.last_ledger_id, 0), COALESCE(c.credited, 0), COALESCE(c.debited, 0)
		FROM merchant_balance b LEFT JOIN reconcile_checkpoints c ON c.merchant_id = b.merchant_id
		WHERE b.merchant_id IN (`+in+`)`, args...)
}

// readGrants sums each merchant's active grants' remaining (ledger.RemainingSQL).
func readGrants(ctx context.Context, tx *sql.Tx, merchants []string, views map[string]ledgerView) error {
	in, args := ledger.InList(merchants)
	return query(ctx, tx, "sum grants", func(rows *sql.Rows) error {
		var m string
		var left, n int64
		err := rows.Scan(&m, &left, &n)
		v := views[m]
		v.GrantsLeft, v.Grants = left, n
		views[m] = v
		return err
	}, `SELECT b.merchant_id, COALESCE(SUM(CASE WHEN g.state = 'active' THEN `+ledger.RemainingSQL+` END), 0), COUNT(g.grant_id)
		FROM merchant_balance b JOIN quota_grants g ON g.merchant_id = b.merchant_id
		WHERE b.merchant_id IN (`+in+`) GROUP BY b.merchant_id`, args...)
}

// readSums adds up each merchant's ledger rows after its checkpoint (unless
// stale, as in baseOf) through the (merchant_id, id) index, split at the
// settled bound. The index is forced: a range on the primary key would scan
// the whole ledger for every page.
func readSums(ctx context.Context, tx *sql.Tx, merchants []string, bound int64, full bool, views map[string]ledgerView) error {
	after := " AND l.id > COALESCE(c.last_ledger_id, 0)"
	if full {
		after = ""
	}
	in, args := ledger.InList(merchants)
	q := `SELECT b.merchant_id,
		COALESCE(SUM(CASE WHEN l.kind = 'credit' AND l.id <= ? THEN l.amount END), 0),
		COALESCE(SUM(CASE WHEN l.kind IN ('debit', 'expire') AND l.id <= ? THEN l.amount END), 0),
		COALESCE(SUM(CASE WHEN l.kind = 'credit' AND l.id > ? THEN l.amount END), 0),
		COALESCE(SUM(CASE WHEN l.kind IN ('debit', 'expire') AND l.id > ? THEN l.amount END), 0),
		COALESCE(MAX(CASE WHEN l.id <= ? THEN l.id END), 0)
		FROM merchant_balance b
		LEFT JOIN reconcile_checkpoints c ON c.merchant_id = b.merchant_id AND c.last_ledger_id <= ?
		JOIN quota_ledger l FORCE INDEX (quota_ledger_merchant_id) ON l.merchant_id = b.merchant_id` + after + `
		WHERE b.merchant_id IN (` + in + `)
		GROUP BY b.merchant_id`
	return query(ctx, tx, "sum ledger", func(rows *sql.Rows) error {
		var m string
		var sc, sd, fc, fd, maxID int64
		err := rows.Scan(&m, &sc, &sd, &fc, &fd, &maxID)
		v := views[m]
		v.SettledCredit, v.SettledDebit, v.FreshCredit, v.FreshDebit, v.MaxSettled = sc, sd, fc, fd, maxID
		views[m] = v
		return err
	}, q, append([]any{bound, bound, bound, bound, bound, bound}, args...)...)
}

// auditLedger compares a merchant's ledger sums and balance row. Both kinds it
// finds are critical: reported, never repaired.
func auditLedger(m string, v ledgerView) []Finding {
	var out []Finding
	b := v.Balance
	if b.belowPolicy() {
		out = append(out, Finding{MerchantID: m, Kind: KindNegativeBalance, Expected: b.Credited - b.Debited,
			Delta: b.Credited - b.Debited, Action: ActionReported, Detail: b.describe()})
	}
	for _, side := range []struct {
		name          string
		balance, rows int64
	}{{"credit", b.Credited, v.credits()}, {"debit", b.Debited, v.debits()}} {
		if side.balance == side.rows {
			continue
		}
		out = append(out, Finding{MerchantID: m, Kind: KindLedgerMismatch, Expected: side.rows,
			Delta: side.balance - side.rows, Action: ActionReported,
			Detail: fmt.Sprintf("%s rows sum to %d but the balance row says %s=%d (checkpoint at id %d; rerun with --ledger-full to rule out a stale checkpoint)",
				side.name, side.rows, side.name+"ed", side.balance, v.Base.LastID)})
	}
	// The grants stand for the balance: a debt (below 0) is paid back by the
	// next grant before it counts (ledger.PayBack).
	if want := max(0, b.Credited-b.Debited); v.Grants > 0 && v.GrantsLeft != want {
		out = append(out, Finding{MerchantID: m, Kind: KindGrantsMismatch, Expected: want, Delta: v.GrantsLeft - want,
			Action: ActionReported, Detail: fmt.Sprintf("active grants' remaining sums to %d, the available balance is %d", v.GrantsLeft, b.Credited-b.Debited)})
	}
	return out
}

// saveCheckpoints upserts checkpoints. An incremental save never moves a
// checkpoint backwards (two reconcilers may race) unless the stored one is
// beyond the bound (stale, see baseOf); a full one overwrites.
func saveCheckpoints(ctx context.Context, db *sql.DB, cps map[string]checkpoint, bound int64, full bool) error {
	if len(cps) == 0 {
		return nil
	}
	var vals []string
	var args []any
	for _, m := range slices.Sorted(maps.Keys(cps)) { // one row order for every reconciler: fewer deadlocks
		cp := cps[m]
		vals = append(vals, "(?,?,?,?)")
		args = append(args, m, cp.LastID, cp.Credited, cp.Debited)
	}
	// Forward only, or off a stale checkpoint; LedgerFull always. last_ledger_id
	// is set last: the conditions read the stored value.
	move := "VALUES(last_ledger_id) > last_ledger_id OR last_ledger_id > ?"
	if full {
		move = "TRUE"
	} else {
		args = append(args, bound, bound, bound)
	}
	update := fmt.Sprintf(`credited = IF(%[1]s, VALUES(credited), credited), debited = IF(%[1]s, VALUES(debited), debited),
		last_ledger_id = IF(%[1]s, VALUES(last_ledger_id), last_ledger_id)`, move)
	err := ledger.RetryDeadlocks(ctx, nil, func() error {
		_, err := db.ExecContext(ctx, "INSERT INTO reconcile_checkpoints (merchant_id, last_ledger_id, credited, debited) VALUES "+
			strings.Join(vals, ",")+" ON DUPLICATE KEY UPDATE "+update, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("reconcile: save checkpoints: %w", err)
	}
	return nil
}

// ledgerPass audits the ledger of a page of merchants and advances their
// checkpoints. It returns the findings.
func (r *Reconciler) ledgerPass(ctx context.Context, merchants []string) ([]Finding, error) {
	// Taken before the snapshot: a commit the snapshot misses is later still.
	bound := settledBound(r.now(), r.late, r.cfg.Settle)
	start := time.Now()
	views, err := readLedger(ctx, r.db, merchants, bound, r.cfg.LedgerFull)
	if err != nil {
		return nil, err
	}
	var found []Finding
	cps := make(map[string]checkpoint)
	for m, v := range views {
		found = append(found, auditLedger(m, v)...)
		if cp, ok := v.next(r.cfg.LedgerFull); ok {
			cps[m] = cp
		}
	}
	if err := saveCheckpoints(ctx, r.db, cps, bound, r.cfg.LedgerFull); err != nil {
		return nil, err
	}
	r.m.ledgerSeconds.Observe(time.Since(start).Seconds())
	return found, nil
}
