package adminapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
)

type eventDoc struct {
	EventID string `json:"event_id"`
	Ledger  []struct {
		Kind         string `json:"kind"`
		Reason       string `json:"reason"`
		Seq          *int64 `json:"seq"`
		BalanceAfter *int64 `json:"balance_after"`
	} `json:"ledger"`
	DeadLetters []struct {
		OriginalOffset int64  `json:"original_offset"`
		Origin         string `json:"origin"`
		ErrorClass     string `json:"error_class"`
		ReplayCount    int    `json:"replay_count"`
		ReplayJob      string `json:"replay_job"`
		MerchantID     string `json:"merchant"`
		Copies         int    `json:"copies"`
		Resolved       bool   `json:"resolved"`
	} `json:"dead_letters"`
	BalanceEvents []struct {
		Type         string `json:"type"`
		BalanceAfter *int64 `json:"balance_after"`
	} `json:"balance_events"`
}

// One event's fate: its ledger row with the balance after it, the balance
// event it caused, and its dead-letter records (a conflicting redelivery,
// then a replay of it that failed again) with provenance, replay history
// and resolution; nothing known is a 404 that says so.
func TestEventLookup(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-ev", 10)
	pay := event.PaymentSucceeded{EventID: "evt-drain", PaymentID: "p-1", MerchantID: "m-ev", Amount: 10, Source: event.SourcePC, OccurredAt: time.Now()}
	g.apply(pay)
	g.apply(event.PaymentSucceeded{EventID: "evt-ghost", PaymentID: "p-2", MerchantID: "m-ghost", Amount: 1, Source: event.SourcePC, OccurredAt: time.Now()})

	conflict := pay
	conflict.Amount = 11
	first := dlq.FromFailure(kafka.Message{Topic: "payments", Partition: 1, Offset: 7, Key: []byte("m-ev"), Value: conflict.Encode()},
		"billing-worker", dlq.ClassConflict, errors.New("event_id reused"), 1, time.Now(), time.Now())
	replayed := kafka.Message{Topic: "payments", Partition: 1, Offset: 42, Key: []byte("m-ev"), Value: conflict.Encode(), Headers: []kafka.Header{
		{Key: dlq.HeaderReplayJob, Value: []byte("job-1")}, {Key: dlq.HeaderReplayCount, Value: []byte("1")}, {Key: dlq.HeaderReplayOrigin, Value: []byte(first.Provenance())}}}
	g.deadLetter(first, dlq.FromFailure(replayed, "billing-worker", dlq.ClassConflict, errors.New("event_id reused"), 1, time.Now(), time.Now()))
	dc, err := dlq.NewClient(dlq.Broker{Addrs: g.kafka.Brokers, Transport: g.transport})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resolve(context.Background(), g.dlqTopic, dlq.Filter{EventIDs: []string{"evt-drain"}}, "duplicate", false); err != nil {
		t.Fatal(err)
	}

	var v eventDoc
	g.get("/v1/events/evt-drain", &v)
	if len(v.Ledger) != 1 || v.Ledger[0].Kind != "debit" || v.Ledger[0].BalanceAfter == nil || *v.Ledger[0].BalanceAfter != 0 || v.Ledger[0].Seq == nil {
		t.Errorf("ledger %+v, want the debit leaving 0", v.Ledger)
	}
	var depleted bool
	for _, b := range v.BalanceEvents {
		depleted = depleted || (b.Type == "quota.depleted" && b.BalanceAfter != nil && *b.BalanceAfter == 0)
	}
	if !depleted {
		t.Errorf("balance events %+v, want quota.depleted", v.BalanceEvents)
	}
	d := v.DeadLetters
	if len(d) != 2 || d[0].OriginalOffset != 7 || d[1].OriginalOffset != 42 || d[0].ReplayCount != 0 || d[1].ReplayCount != 1 ||
		d[1].ReplayJob != "job-1" || d[0].Origin != "" || d[1].Origin != "payments/1/7" || d[1].Copies != 2 ||
		!d[0].Resolved || !d[1].Resolved || d[0].ErrorClass != "conflict" || d[0].MerchantID != "m-ev" {
		t.Errorf("dead letters %+v, want the original and its replay, one message, resolved", d)
	}

	v = eventDoc{}
	g.get("/v1/events/evt-ghost", &v)
	if len(v.Ledger) != 1 || v.Ledger[0].Kind != "rejected" || v.Ledger[0].Reason != "unknown_merchant" || v.Ledger[0].Seq != nil ||
		len(v.DeadLetters) != 0 || len(v.BalanceEvents) != 0 {
		t.Errorf("unknown merchant's payment: %+v", v)
	}
	rec := g.do(http.MethodGet, "/v1/events/evt-never", testToken)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "nothing is known of this event") {
		t.Errorf("unknown event: %d %s", rec.Code, rec.Body)
	}
}
