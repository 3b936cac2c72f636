package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotaflow/billing/internal/sqltx"
)

// sums are the totals of one merchant's ledger rows.
type sums struct {
	MerchantID string
	Credited   int64 // sum of credit rows
	Debited    int64 // sum of debit rows
	Rejected   int64 // number of rejected rows
}

// sums adds up the ledger rows of the given merchants, or of every merchant
// when merchantIDs is empty. Merchants without rows are absent from the map.
func (s *Store) sums(ctx context.Context, merchantIDs []string) (map[string]sums, error) {
	q := `SELECT merchant_id,
		COALESCE(SUM(CASE WHEN kind IN ('credit', 'billed', 'refund') THEN amount ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN kind IN ('debit', 'expire') THEN amount ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN kind = 'rejected' THEN 1 ELSE 0 END), 0)
		FROM quota_ledger`
	var args []any
	if len(merchantIDs) > 0 {
		var in string
		in, args = sqltx.InList(merchantIDs)
		q += " WHERE merchant_id IN (" + in + ")"
	}
	out := map[string]sums{}
	err := s.query(ctx, s.db, q+" GROUP BY merchant_id", args, func(rows *sql.Rows) error {
		var r sums
		err := rows.Scan(&r.MerchantID, &r.Credited, &r.Debited, &r.Rejected)
		out[r.MerchantID] = r
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: sums: %w", err)
	}
	return out, nil
}
