package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/sqltx"
)

// checkpoint is a reconcile_checkpoints row: the credit and debit sums of a
// merchant's ledger rows with seq <= LastSeq. A merchant's rows commit in seq
// order (the ledger's promise), so once a snapshot shows seq n, no row at or
// below n is still to come: a checkpoint needs no margin for late commits.
type checkpoint struct {
	LastSeq, Credited, Debited int64
}

// ledgerView is one merchant's balance row and ledger sums, from one snapshot.
type ledgerView struct {
	Balance balance
	Seq     int64      // the balance row's seq: the merchant's last ledger row
	Base    checkpoint // zero without a checkpoint, with LedgerFull, or when Stale
	Stale   bool       // the stored checkpoint lies beyond the balance row's seq: ignored, to be overwritten
	// Credit and Debit sum the rows after Base.LastSeq; MaxSeq is the
	// highest seq read, 0 if none.
	Credit, Debit, MaxSeq int64
	// GrantsLeft sums the active grants' remaining; Grants counts the
	// merchant's grants of any state (0: a balance row written by hand,
	// whose balance the next debit adopts as an opening grant).
	GrantsLeft int64
	Grants     int64
}

func (v ledgerView) credits() int64 { return v.Base.Credited + v.Credit }
func (v ledgerView) debits() int64  { return v.Base.Debited + v.Debit }

// next is the checkpoint this view allows, and whether it is worth writing.
func (v ledgerView) next(full bool) (checkpoint, bool) {
	cp := checkpoint{LastSeq: max(v.Base.LastSeq, v.MaxSeq), Credited: v.credits(), Debited: v.debits()}
	return cp, full || v.Stale || v.MaxSeq > v.Base.LastSeq
}

// baseOf is what a pass may build on of a stored checkpoint: nothing with
// LedgerFull, and nothing (stale) when it lies beyond the merchant's last
// seq, which no reconciler writes (a restored or hand-edited database).
func baseOf(stored checkpoint, seq int64, full bool) (base checkpoint, stale bool) {
	switch {
	case full:
		return checkpoint{}, false
	case stored.LastSeq > seq:
		return checkpoint{}, true
	}
	return stored, false
}

// readLedger reads the balance rows, checkpoints and new ledger sums of
// merchants in one snapshot, so that no commit falls between them.
func readLedger(ctx context.Context, db *sql.DB, merchants []string, full bool) (map[string]ledgerView, error) {
	views := make(map[string]ledgerView, len(merchants))
	err := snapshot(ctx, db, func(tx *sql.Tx) error {
		if err := readBases(ctx, tx, merchants, full, views); err != nil {
			return err
		}
		if err := readGrants(ctx, tx, merchants, views); err != nil {
			return err
		}
		return readSums(ctx, tx, merchants, views)
	})
	return views, err
}

func readBases(ctx context.Context, tx *sql.Tx, merchants []string, full bool, views map[string]ledgerView) error {
	in, args := sqltx.InList(merchants)
	return query(ctx, tx, "read checkpoints", func(rows *sql.Rows) error {
		var m string
		var v ledgerView
		var cp checkpoint
		err := rows.Scan(&m, &v.Balance.Credited, &v.Balance.Debited, &v.Balance.Policy.Kind, &v.Balance.Policy.Floor, &v.Seq, &cp.LastSeq, &cp.Credited, &cp.Debited)
		v.Base, v.Stale = baseOf(cp, v.Seq, full)
		views[m] = v
		return err
	}, `SELECT b.merchant_id, b.credited, b.debited, b.overdraft_policy, b.overdraft_floor, b.seq,
		COALESCE(c.last_seq, 0), COALESCE(c.credited, 0), COALESCE(c.debited, 0)
		FROM merchant_balance b LEFT JOIN reconcile_checkpoints c ON c.merchant_id = b.merchant_id
		WHERE b.merchant_id IN (`+in+`)`, args...)
}

// readGrants sums each merchant's active grants' remaining and counts its
// grants.
func readGrants(ctx context.Context, tx *sql.Tx, merchants []string, views map[string]ledgerView) error {
	grants, err := ledgerdb.ReadGrants(ctx, tx, merchants)
	if err != nil {
		return fmt.Errorf("reconcile: sum grants: %w", err)
	}
	for _, g := range grants {
		v := views[g.MerchantID]
		if v.Grants++; g.State == ledger.GrantActive {
			v.GrantsLeft += g.Remaining
		}
		views[g.MerchantID] = v
	}
	return nil
}

// readSums adds up each merchant's ledger rows after its base (readBases)
// through the (merchant_id, seq) index. The index is forced: a range on the
// primary key would scan the whole ledger for every page.
func readSums(ctx context.Context, tx *sql.Tx, merchants []string, views map[string]ledgerView) error {
	in, args := sqltx.InList(merchants)
	after := make([]any, 0, 2*len(merchants))
	cases := ""
	for _, m := range merchants {
		after = append(after, m, views[m].Base.LastSeq)
		cases += " WHEN ? THEN ?"
	}
	if len(merchants) == 0 {
		return nil
	}
	q := `SELECT l.merchant_id,
		COALESCE(SUM(CASE WHEN l.kind IN ('credit', 'billed', 'refund') THEN l.amount END), 0),
		COALESCE(SUM(CASE WHEN l.kind IN ('debit', 'expire') THEN l.amount END), 0),
		COALESCE(MAX(l.seq), 0)
		FROM quota_ledger l FORCE INDEX (quota_ledger_merchant_seq)
		WHERE l.merchant_id IN (` + in + `) AND l.seq > CASE l.merchant_id` + cases + ` END
		GROUP BY l.merchant_id`
	return query(ctx, tx, "sum ledger", func(rows *sql.Rows) error {
		var m string
		var c, d, maxSeq int64
		err := rows.Scan(&m, &c, &d, &maxSeq)
		if v, known := views[m]; known {
			v.Credit, v.Debit, v.MaxSeq = c, d, maxSeq
			views[m] = v
		}
		return err
	}, q, append(args, after...)...)
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
			Detail: fmt.Sprintf("%s rows sum to %d but the balance row says %s=%d (checkpoint at seq %d; rerun with --ledger-full to rule out a wrong checkpoint)",
				side.name, side.rows, side.name+"ed", side.balance, v.Base.LastSeq)})
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
// checkpoint backwards (two reconcilers may race); a forced one (LedgerFull,
// or a stale checkpoint) overwrites.
func saveCheckpoints(ctx context.Context, db *sql.DB, cps map[string]checkpoint, forced bool) error {
	if len(cps) == 0 {
		return nil
	}
	var vals []string
	var args []any
	for _, m := range slices.Sorted(maps.Keys(cps)) { // one row order for every reconciler: fewer deadlocks
		cp := cps[m]
		vals = append(vals, "(?,?,?,?)")
		args = append(args, m, cp.LastSeq, cp.Credited, cp.Debited)
	}
	// Forward only, unless forced. last_seq is set last: the conditions
	// read the stored value.
	move := "VALUES(last_seq) > last_seq"
	if forced {
		move = "TRUE"
	}
	update := fmt.Sprintf(`credited = IF(%[1]s, VALUES(credited), credited), debited = IF(%[1]s, VALUES(debited), debited),
		last_seq = IF(%[1]s, VALUES(last_seq), last_seq)`, move)
	err := sqltx.RetryDeadlocks(ctx, nil, func() error {
		_, err := db.ExecContext(ctx, "INSERT INTO reconcile_checkpoints (merchant_id, last_seq, credited, debited) VALUES "+
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
	start := time.Now()
	views, err := readLedger(ctx, r.db, merchants, r.cfg.LedgerFull)
	if err != nil {
		return nil, err
	}
	var found []Finding
	forward, forced := make(map[string]checkpoint), make(map[string]checkpoint)
	for m, v := range views {
		found = append(found, auditLedger(m, v)...)
		if cp, ok := v.next(r.cfg.LedgerFull); ok && (r.cfg.LedgerFull || v.Stale) {
			forced[m] = cp
		} else if ok {
			forward[m] = cp
		}
	}
	if err := saveCheckpoints(ctx, r.db, forward, false); err != nil {
		return nil, err
	}
	if err := saveCheckpoints(ctx, r.db, forced, true); err != nil {
		return nil, err
	}
	r.m.ledgerSeconds.Observe(time.Since(start).Seconds())
	return found, nil
}
