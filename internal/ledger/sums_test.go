package ledger

import (
	"context"
	"fmt"
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
	q := s.db.WithContext(ctx).Model(&Row{}).Select(
		"merchant_id",
		"COALESCE(SUM(CASE WHEN kind = 'credit' THEN amount ELSE 0 END), 0) AS credited",
		"COALESCE(SUM(CASE WHEN kind IN ('debit', 'expire') THEN amount ELSE 0 END), 0) AS debited",
		"COALESCE(SUM(CASE WHEN kind = 'rejected' THEN 1 ELSE 0 END), 0) AS rejected",
	).Group("merchant_id")
	if len(merchantIDs) > 0 {
		q = q.Where("merchant_id IN ?", merchantIDs)
	}
	var rows []sums
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: sums: %w", err)
	}
	out := make(map[string]sums, len(rows))
	for _, r := range rows {
		out[r.MerchantID] = r
	}
	return out, nil
}
