package ledger

import (
	"strings"

	"gorm.io/gorm"
)

// insertColumns are the columns of quota_ledger that insert writes, in the
// order of InsertStatement's values.
const insertColumns = "id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at"

// insert writes rows with multi-row INSERTs of at most InsertChunk rows each.
func (s *Store) insert(tx *gorm.DB, rows []Row) error {
	for off := 0; off < len(rows); off += s.opts.InsertChunk {
		chunk := rows[off:min(off+s.opts.InsertChunk, len(rows))]
		query, args := InsertStatement(chunk)
		if _, err := execRaw(tx, query, args); err != nil {
			return &chunkError{offset: off, err: err}
		}
	}
	return nil
}

// InsertStatement is one INSERT of rows into quota_ledger, with placeholders,
// and its arguments: every column is written, ID and CreatedAt included.
func InsertStatement(rows []Row) (string, []any) {
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(len("INSERT INTO quota_ledger () VALUES ") + len(insertColumns) + len(rows)*(len(tuple)+2))
	b.WriteString("INSERT INTO quota_ledger (" + insertColumns + ") VALUES ")
	args := make([]any, 0, 11*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
		var after any
		if r.BalanceAfter != nil {
			after = *r.BalanceAfter
		}
		args = append(args, r.ID, r.EventID, r.MerchantID, string(r.Kind), r.Amount, after,
			r.Reason, r.PaymentID, r.Source, r.OccurredAt, r.CreatedAt)
	}
	return b.String(), args
}
