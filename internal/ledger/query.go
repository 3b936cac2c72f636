package ledger

import (
	"context"
	"database/sql"
	"fmt"
)

// ExistingEvents returns the ledger rows of those eventIDs that have one, by
// event_id, in one indexed query (the UNIQUE event_id index). Only id,
// event_id, merchant_id, kind, amount and balance_after are read.
func (s *Store) ExistingEvents(ctx context.Context, eventIDs []string) (map[string]Row, error) {
	out := make(map[string]Row, len(eventIDs))
	if len(eventIDs) == 0 {
		return out, nil
	}
	in, args := InList(eventIDs)
	err := queryRaw(s.db.WithContext(ctx),
		"SELECT id, event_id, merchant_id, kind, amount, balance_after FROM quota_ledger WHERE event_id IN ("+in+")",
		args, func(rows *sql.Rows) error {
			var r Row
			var kind string
			var after sql.NullInt64
			if err := rows.Scan(&r.ID, &r.EventID, &r.MerchantID, &kind, &r.Amount, &after); err != nil {
				return err
			}
			r.Kind = Kind(kind)
			if after.Valid {
				r.BalanceAfter = &after.Int64
			}
			out[r.EventID] = r
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("ledger: existing events: %w", err)
	}
	return out, nil
}

// Balances returns the balance rows of those merchants that have one, in one
// query. A merchant missing from the map is unknown.
func (s *Store) Balances(ctx context.Context, merchantIDs []string) (map[string]Balance, error) {
	out := make(map[string]Balance, len(merchantIDs))
	if len(merchantIDs) == 0 {
		return out, nil
	}
	var rows []Balance
	if err := s.db.WithContext(ctx).Where("merchant_id IN ?", merchantIDs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: balances: %w", err)
	}
	for _, b := range rows {
		out[b.MerchantID] = b
	}
	return out, nil
}

// Sums adds up the ledger rows of the given merchants, or of every merchant
// when merchantIDs is empty. Merchants without rows are absent from the map.
// It reads the whole of each merchant's ledger: an audit tool, not the hot path.
func (s *Store) Sums(ctx context.Context, merchantIDs []string) (map[string]Sums, error) {
	q := s.db.WithContext(ctx).Model(&Row{}).Select(
		"merchant_id",
		"COALESCE(SUM(CASE WHEN kind = 'credit' THEN amount ELSE 0 END), 0) AS credited",
		"COALESCE(SUM(CASE WHEN kind = 'debit' THEN amount ELSE 0 END), 0) AS debited",
		"COALESCE(SUM(CASE WHEN kind = 'rejected' THEN 1 ELSE 0 END), 0) AS rejected",
	).Group("merchant_id")
	if len(merchantIDs) > 0 {
		q = q.Where("merchant_id IN ?", merchantIDs)
	}
	var rows []Sums
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: sums: %w", err)
	}
	out := make(map[string]Sums, len(rows))
	for _, r := range rows {
		out[r.MerchantID] = r
	}
	return out, nil
}
