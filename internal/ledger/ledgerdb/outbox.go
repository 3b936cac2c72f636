package ledgerdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// batchEvents lists the balance events of a transaction's rows (ledger.BatchEvents).
func (s *Store) batchEvents(rows []ledger.Row, bals []ledger.Balance) []quotaevent.Event {
	return ledger.BatchEvents(rows, bals, s.opts.Events.DefaultAlerts, s.opts.Events.PerPayment)
}

const outboxTuple = "(?, ?, ?, ?, ?, ?, ?, ?)"

// writeOutbox inserts events into quota_outbox in tx, in order (seq follows
// it). A second row for one id fails the transaction: it cannot happen
// without a second ledger row for its cause, which UNIQUE(event_id) refuses.
func (s *Store) writeOutbox(ctx context.Context, tx *sql.Tx, events []quotaevent.Event) error {
	for off := 0; off < len(events); off += maxOutboxInsert {
		part := events[off:min(off+maxOutboxInsert, len(events))]
		args := make([]any, 0, 8*len(part))
		for _, e := range part {
			var th any
			if e.Threshold != nil {
				th = *e.Threshold
			}
			args = append(args, e.ID, e.MerchantID, string(e.Type), e.BalanceBefore, e.BalanceAfter, th, e.CausedBy, e.OccurredAt)
		}
		q := "INSERT INTO quota_outbox (id, merchant_id, type, balance_before, balance_after, threshold, caused_by, occurred_at) VALUES " +
			outboxTuple + strings.Repeat(", "+outboxTuple, len(part)-1)
		if _, err := s.exec(ctx, tx, q, args); err != nil {
			return fmt.Errorf("ledger: write %d balance events: %w", len(part), err)
		}
	}
	return nil
}

// maxOutboxInsert bounds one outbox INSERT (placeholders stay under 65,535).
const maxOutboxInsert = 2048

func (s *Store) eventsWritten() {
	if s.opts.Events.Written != nil {
		s.opts.Events.Written()
	}
}
