package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// findingsPerInsert bounds the rows of one multi-row INSERT.
const findingsPerInsert = 500

// writeAudit appends the run row and its findings in one transaction and
// returns the run id. Audit rows are only ever inserted.
func writeAudit(ctx context.Context, db *sql.DB, r *Report) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("reconcile: audit: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var errText any
	if r.Error != "" {
		errText = r.Error
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO reconcile_runs
		(started_at, finished_at, dry_run, status, merchants_checked, clean, busy_skipped, drifted, repaired, abs_drift, error)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		r.StartedAt, r.FinishedAt, r.DryRun, string(r.Status), r.Checked, r.Clean, r.Busy, r.Drifted, r.Repaired, r.AbsDrift, errText)
	if err != nil {
		return 0, fmt.Errorf("reconcile: audit run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("reconcile: audit run id: %w", err)
	}
	for part := range slices.Chunk(r.Findings, findingsPerInsert) {
		vals := make([]string, len(part))
		args := make([]any, 0, 9*len(part))
		for i, f := range part {
			vals[i] = "(?,?,?,?,?,?,?,?,?)"
			args = append(args, id, f.MerchantID, string(f.Kind), f.RedisValue, f.Expected, f.Delta, f.Pending,
				string(f.Action), truncate(f.Detail, maxDetail))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reconcile_findings
			(run_id, merchant_id, kind, redis_value, expected, delta, pending, action, detail) VALUES `+strings.Join(vals, ","), args...); err != nil {
			return 0, fmt.Errorf("reconcile: audit findings: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("reconcile: audit commit: %w", err)
	}
	return id, nil
}
