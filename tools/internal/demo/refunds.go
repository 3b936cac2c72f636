package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// refundsSummary is what the refunds did, held against the reference: a
// payment gives back the least of its debit and what its refunds ask (each
// refund id once), a rejected one nothing, whatever the order.
type refundsSummary struct {
	Messages, IDs, Early int // refund messages, refund ids, ids sent ahead of their payment
	States               map[ledger.RefundState]int
	Beyond               int // refunds applied with a part beyond their debit
	DeadLettered         int // refund messages dead-lettered (by provenance): their conflicts
	Mismatch             []string
}

// laterRefund is a refund sent after its payment: once the producer has
// written the payments that come before it in the traffic.
type laterRefund struct {
	msg      kafka.Message
	payments int
}

// splitRefunds returns the refunds to send ahead of the payments (their
// payment comes later in the traffic) and along with them, after their own.
func splitRefunds(refunds []workload.Message) (ahead []kafka.Message, later []laterRefund) {
	for k, m := range refunds {
		msg := kafka.Message{Key: m.Key, Value: m.Value}
		if m.RefundKind == workload.Early {
			ahead = append(ahead, msg)
		} else {
			later = append(later, laterRefund{msg: msg, payments: m.Seq - k}) // the messages before it that are not refunds
		}
	}
	return ahead, later
}

// produceRefunds writes msgs to the refunds topic.
func (r *run) produceRefunds(ctx context.Context, msgs []kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	w := workload.NewKafkaWriter(r.st.Brokers, r.st.RefundsTopic, r.st.Transport)
	defer w.Close()
	return scenario.Produce(ctx, w, msgs, nil)
}

// produceAlong writes each later refund once the payments before it in the
// traffic are written, so refunds and payments interleave as they did.
func (r *run) produceAlong(ctx context.Context, later []laterRefund) error {
	w := workload.NewKafkaWriter(r.st.Brokers, r.st.RefundsTopic, r.st.Transport)
	defer w.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(later) > 0 {
		n := 0
		for n < len(later) && int64(later[n].payments) <= r.produced.Load() {
			n++
		}
		if n > 0 {
			msgs := make([]kafka.Message, n)
			for i := range msgs {
				msgs[i] = later[i].msg
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("demo: produce refunds: %w", err)
			}
			later = later[n:]
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// checkRefunds holds the refunds' end state against the reference and
// returns the dead letters that are not refunds'.
func (r *run) checkRefunds(ctx context.Context, db *gorm.DB, records []dlq.Record) ([]dlq.Record, error) {
	s := &r.sum.Refunds
	asked := map[string]int64{}
	ids := map[string]bool{}
	for _, m := range r.traffic.Refunds {
		s.Messages++
		if m.Kind == workload.Valid {
			ids[m.Refund.RefundID] = true
			asked[m.Refund.EventID] += m.Refund.Amount
			if m.RefundKind == workload.Early {
				s.Early++
			}
		}
	}
	s.IDs = len(ids)
	var recs []struct {
		RefundID, EventID string
		State             ledger.RefundState
		Taken, Beyond     int64
	}
	if err := db.WithContext(ctx).Raw("SELECT refund_id, event_id, state, taken, beyond FROM quota_refunds").Scan(&recs).Error; err != nil {
		return nil, fmt.Errorf("demo: read the refunds: %w", err)
	}
	var rows []struct {
		EventID, MerchantID string
		Kind                ledger.Kind
		Amount              int64
	}
	if err := db.WithContext(ctx).Raw("SELECT event_id, merchant_id, kind, amount FROM quota_ledger WHERE kind IN ('credit', 'debit', 'rejected')").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("demo: read the ledger: %w", err)
	}
	fail := func(format string, args ...any) { s.Mismatch = append(s.Mismatch, fmt.Sprintf(format, args...)) }
	s.States = map[ledger.RefundState]int{}
	taken := map[string]int64{}
	beyond := map[string]bool{}
	for _, rec := range recs {
		s.States[rec.State]++
		taken[rec.EventID] += rec.Taken
		if rec.Beyond > 0 { // applied beyond the debit, or void (all of it)
			beyond[rec.RefundID] = true
			if rec.State == ledger.RefundApplied {
				s.Beyond++
			}
		}
		if !ids[rec.RefundID] {
			fail("refund %s recorded, never sent", rec.RefundID)
		}
	}
	if len(recs) != s.IDs || s.States[ledger.RefundPending] > 0 {
		fail("%d refunds recorded (%v) of %d sent: want each once, none waiting", len(recs), s.States, s.IDs)
	}
	// The reference balance: grants, less the debits, plus what each
	// debited payment gives back.
	want := map[string]int64{}
	debit := map[string]int64{}
	for _, row := range rows {
		switch row.Kind {
		case ledger.KindCredit:
			want[row.MerchantID] += row.Amount
		case ledger.KindDebit:
			want[row.MerchantID] -= row.Amount - min(row.Amount, asked[row.EventID])
			debit[row.EventID] = row.Amount
		}
	}
	for ev, n := range taken {
		if n != min(debit[ev], asked[ev]) {
			fail("payment %s: its refunds took %d, the reference says %d (debit %d)", ev, n, min(debit[ev], asked[ev]), debit[ev])
		}
	}
	var bals []struct {
		MerchantID string
		Balance    int64
	}
	if err := db.WithContext(ctx).Raw("SELECT merchant_id, credited - debited AS balance FROM merchant_balance").Scan(&bals).Error; err != nil {
		return nil, fmt.Errorf("demo: read the balances: %w", err)
	}
	for _, b := range bals {
		if b.Balance != want[b.MerchantID] {
			fail("merchant %s: balance %d, the reference says %d", b.MerchantID, b.Balance, want[b.MerchantID])
		}
	}
	var others []dlq.Record
	dead := map[string]bool{}
	for _, rec := range records {
		if rec.OriginalTopic != r.st.RefundsTopic {
			others = append(others, rec)
			continue
		}
		ref, err := event.DecodeRefund(rec.Key, rec.Value)
		if rec.Class != dlq.ClassConflict || err != nil || !beyond[ref.RefundID] {
			fail("dead letter %s (%s: %s) is no refund's conflict", rec.Provenance(), rec.Class, rec.Message)
		}
		dead[rec.Provenance()] = true
	}
	s.DeadLettered = len(dead)
	return others, nil
}

func (s refundsSummary) write(w io.Writer) {
	fmt.Fprintf(w, "refunds      %d messages, %d refund ids (%d ahead of their payment, the rest after it), %d beyond their debit (%d dead-lettered as conflicts); recorded",
		s.Messages, s.IDs, s.Early, s.Beyond, s.DeadLettered)
	for _, st := range slices.Sorted(maps.Keys(s.States)) {
		fmt.Fprintf(w, " %s=%d", st, s.States[st])
	}
	fmt.Fprintln(w, "; every balance equals the reference, no refund applied twice, none beyond a debit")
	for _, m := range s.Mismatch {
		fmt.Fprintf(w, "  MISMATCH %s\n", m)
	}
}
