package adminapi

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
)

// DeadLetters reads a message's dead-letter history (implemented by *dlq.Client).
type DeadLetters interface {
	Trail(ctx context.Context, topic string, f dlq.Filter) ([]dlq.Entry, error)
}

// Events looks one event up across the ledger, the dead-letter topic and
// the outbox: GET /v1/events/{id} and billingctl event show. It reads the
// tables with statements of its own (by the unique keys: event_id, the outbox
// id prefix) and the DLQ topic to its high watermarks, as dlq ls does.
type Events struct {
	db       *sql.DB
	dlq      DeadLetters
	dlqTopic string
}

// NewEvents returns the lookup.
func NewEvents(db *sql.DB, d DeadLetters, dlqTopic string) *Events {
	return &Events{db: db, dlq: d, dlqTopic: dlqTopic}
}

// EventView is what is known of one event; every list is empty, never
// absent. A payment has at most one ledger row (event_id is unique).
type EventView struct {
	EventID       string         `json:"event_id"`
	Ledger        []EventRow     `json:"ledger"`
	DeadLetters   []dlq.Entry    `json:"dead_letters"` // every record, copies included, in topic order
	BalanceEvents []BalanceEvent `json:"balance_events"`
	// Refunds are the refunds of the payment, oldest first.
	Refunds []ledger.RefundRecord `json:"refunds"`
}

// Known reports whether anything at all was found.
func (v EventView) Known() bool {
	return len(v.Ledger)+len(v.DeadLetters)+len(v.BalanceEvents)+len(v.Refunds) > 0
}

// EventRow is the event's ledger row: its outcome (kind, reason) and the
// balance after it, with the grants that paid a debit.
type EventRow struct {
	rowView
	Seq         *int64      `json:"seq,omitempty"` // absent on a rejection of a merchant without a balance row
	Attribution []GrantPart `json:"attribution"`   // a debit paid by several grants, or partly owed
}

// GrantPart is what one grant paid of a debit.
type GrantPart struct {
	GrantID string `json:"grant_id"`
	Amount  int64  `json:"amount"`
}

// BalanceEvent is a balance event the event's ledger row caused, while the
// outbox keeps it (QUOTA_EVENTS_RETENTION after it was sent).
type BalanceEvent struct {
	ID            string     `json:"id"`
	Type          string     `json:"type"`
	MerchantID    string     `json:"merchant_id"`
	BalanceBefore *int64     `json:"balance_before,omitempty"`
	BalanceAfter  *int64     `json:"balance_after,omitempty"`
	Threshold     *int64     `json:"threshold,omitempty"`
	OccurredAt    time.Time  `json:"occurred_at"`
	SentAt        *time.Time `json:"sent_at,omitempty"` // absent until the relay published it
}

// Show looks id up; an error means a store could not be read.
func (e *Events) Show(ctx context.Context, id string) (EventView, error) {
	v := EventView{EventID: id, Ledger: []EventRow{}, DeadLetters: []dlq.Entry{}, BalanceEvents: []BalanceEvent{}, Refunds: []ledger.RefundRecord{}}
	var err error
	if v.Ledger, err = e.ledger(ctx, id); err != nil {
		return v, err
	}
	if v.Refunds, err = ledgerdb.PaymentRefunds(ctx, e.db, id); err != nil {
		return v, err
	}
	if v.BalanceEvents, err = e.balanceEvents(ctx, id); err != nil {
		return v, err
	}
	entries, err := e.dlq.Trail(ctx, e.dlqTopic, dlq.Filter{EventIDs: []string{id}})
	if err != nil {
		return v, fmt.Errorf("adminapi: dead letters of %s: %w", id, err)
	}
	for _, d := range entries {
		if d.Err != nil { // no dead-letter headers: listed, never replayed
			d.Class, d.Message = "unreadable", d.Err.Error()
		}
		v.DeadLetters = append(v.DeadLetters, d)
	}
	return v, nil
}

func (e *Events) ledger(ctx context.Context, id string) ([]EventRow, error) {
	var r EventRow
	var seq sql.NullInt64
	var grant sql.NullString
	err := e.db.QueryRowContext(ctx, "SELECT id, seq, event_id, merchant_id, kind, amount, balance_after, overage, grant_id, reason, payment_id, source, occurred_at, created_at "+
		"FROM quota_ledger WHERE event_id = ?", id).Scan(&r.ID, &seq, &r.EventID, &r.MerchantID, &r.Kind, &r.Amount, &r.BalanceAfter,
		&r.Overage, &grant, &r.Reason, &r.PaymentID, &r.Source, &r.OccurredAt, &r.CreatedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return []EventRow{}, nil
	case err != nil:
		return nil, fmt.Errorf("adminapi: ledger row of %s: %w", id, err)
	}
	r.OccurredAt, r.CreatedAt = r.OccurredAt.UTC(), r.CreatedAt.UTC()
	if seq.Valid {
		r.Seq = &seq.Int64
	}
	if grant.Valid {
		r.GrantID = &grant.String
	}
	r.Attribution = []GrantPart{}
	rows, err := e.db.QueryContext(ctx, "SELECT grant_id, amount FROM quota_attribution WHERE event_id = ? ORDER BY grant_id", id)
	if err != nil {
		return nil, fmt.Errorf("adminapi: attribution of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p GrantPart
		if err := rows.Scan(&p.GrantID, &p.Amount); err != nil {
			return nil, fmt.Errorf("adminapi: attribution of %s: %w", id, err)
		}
		r.Attribution = append(r.Attribution, p)
	}
	return []EventRow{r}, rows.Err()
}

// likeEscaper escapes LIKE's wildcards: an event id may hold "_".
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

func (e *Events) balanceEvents(ctx context.Context, id string) ([]BalanceEvent, error) {
	// The outbox id is <caused_by>/<type>[/<threshold>]: the prefix reads the unique key.
	rows, err := e.db.QueryContext(ctx, "SELECT id, type, merchant_id, balance_before, balance_after, threshold, occurred_at, sent_at "+
		"FROM quota_outbox WHERE id LIKE ? ESCAPE '!' AND caused_by = ? ORDER BY seq", likeEscaper.Replace(id)+"/%", id)
	if err != nil {
		return nil, fmt.Errorf("adminapi: balance events of %s: %w", id, err)
	}
	defer rows.Close()
	out := []BalanceEvent{}
	for rows.Next() {
		var b BalanceEvent
		var sent sql.NullTime
		if err := rows.Scan(&b.ID, &b.Type, &b.MerchantID, &b.BalanceBefore, &b.BalanceAfter, &b.Threshold, &b.OccurredAt, &sent); err != nil {
			return nil, fmt.Errorf("adminapi: balance events of %s: %w", id, err)
		}
		b.OccurredAt = b.OccurredAt.UTC()
		if sent.Valid {
			b.SentAt = new(sent.Time.UTC())
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
