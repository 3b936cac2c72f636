package invariant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/testenv"
)

func ev(id, m string, amount int64) event.PaymentSucceeded {
	return event.PaymentSucceeded{EventID: id, PaymentID: "p-" + id, MerchantID: m, Amount: amount, Source: event.SourcePC, OccurredAt: time.Now()}
}

func TestCheckFindsEachViolation(t *testing.T) {
	ctx := context.Background()
	db := testenv.NewMySQL(t)
	rdb := testenv.NewRedis(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if err := db.DB.Exec(q, args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	exec("INSERT INTO merchant_balance (merchant_id, credited, debited, seq) VALUES ('m-1', 10, 3, 3), ('m-2', 5, 0, 1)")
	exec(`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, occurred_at, seq) VALUES
		(1, 'g-1', 'm-1', 'credit', 10, 10, NOW(), 1),
		(2, 'e-1', 'm-1', 'debit', 3, 7, NOW(), 2),
		(3, 'e-2', 'm-1', 'rejected', 50, 7, NOW(), 3),
		(4, 'g-2', 'm-2', 'credit', 5, 5, NOW(), 1)`)
	rdb.Client.HSet(ctx, rdb.Keys.Quota("m-1"), "remain", 7, "ver", 3)
	rdb.Client.HSet(ctx, rdb.Keys.Quota("m-2"), "remain", 5, "ver", 1)
	good := Produced{Valid: []event.PaymentSucceeded{ev("e-1", "m-1", 3), ev("e-2", "m-1", 50), ev("e-1", "m-1", 3)}, Invalid: 1}
	poison := dlq.Record{OriginalTopic: "t", OriginalPartition: 0, OriginalOffset: 9}
	state := State{DB: db.DB, Redis: rdb.Client, Keys: rdb.Keys, RedisSettled: true,
		DLQ: []dlq.Record{poison, poison}} // two copies of one dead-lettering: at least once is allowed

	r, err := Check(ctx, good, state)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("clean state reported broken:\n%s", r)
	}
	// A run that makes valid messages fail alone on purpose may find them
	// dead-lettered as exhausted; any other class of a valid event still fails.
	exhausted := dlq.Record{OriginalTopic: "t", OriginalPartition: 1, OriginalOffset: 4, Key: []byte("m-1"),
		Value: ev("e-1", "m-1", 3).Encode(), Class: dlq.ClassExhausted}
	exhausting := good
	exhausting.Exhausting = true
	withExhausted := state
	withExhausted.DLQ = []dlq.Record{exhausted}
	if r, err := Check(ctx, exhausting, withExhausted); err != nil || !r.OK() {
		t.Fatalf("an exhausted valid event in a run that exhausts on purpose: %v\n%s", err, r)
	}
	exhausted.Class = dlq.ClassInvalid
	withExhausted.DLQ = []dlq.Record{exhausted}
	if r, err := Check(ctx, exhausting, withExhausted); err != nil || r.OK() {
		t.Fatalf("a valid event dead-lettered as invalid passed: %v\n%s", err, r)
	}
	tests := []struct {
		name   string
		mutate func(p *Produced, s *State)
		want   string
		broken string
	}{
		{"lost event", func(p *Produced, _ *State) { p.Valid = append(p.Valid, ev("e-3", "m-2", 1)) }, "e-3", Events},
		{"row without event", func(p *Produced, _ *State) { p.Valid = p.Valid[:1] }, "no produced event", Events},
		{"wrong amount", func(p *Produced, _ *State) { p.Valid[0].Amount = 4 }, "recorded for", Events},
		{"dlq missing", func(p *Produced, _ *State) { p.Invalid = 2 }, "2 invalid produced", DLQ},
		{"dlq copy differs", func(_ *Produced, s *State) {
			c := s.DLQ[0]
			c.Value = []byte("other")
			s.DLQ = append(s.DLQ, c)
		}, "different payloads", DLQ},
		{"dlq copies count once as distinct", func(p *Produced, s *State) {
			s.DLQ = append(s.DLQ, s.DLQ[0])
			p.Invalid = 2
		}, "1 distinct messages dead-lettered, 2 invalid produced", DLQ},
		{"valid event dead-lettered in place of a poison one", func(_ *Produced, s *State) {
			s.DLQ = []dlq.Record{{OriginalTopic: "t", OriginalPartition: 1, OriginalOffset: 4, Key: []byte("m-1"), Value: ev("e-1", "m-1", 3).Encode()}}
		}, "valid event e-1 (merchant m-1, amount 3) dead-lettered from t/1@4", DLQ},
		{"unknown event dead-lettered in place of a poison one", func(_ *Produced, s *State) {
			s.DLQ = []dlq.Record{{OriginalTopic: "t", OriginalPartition: 1, OriginalOffset: 5, Key: []byte("m-1"), Value: ev("e-7", "m-1", 3).Encode()}}
		}, "event e-7 dead-lettered from t/1@5 conflicts with no produced event", DLQ},
		{"negative remain", func(_ *Produced, s *State) {
			s.RedisSettled = false
			rdb.Client.HSet(ctx, rdb.Keys.Quota("m-3"), "remain", -1)
			exec("INSERT INTO merchant_balance (merchant_id, credited, debited) VALUES ('m-3', 0, 0)")
			t.Cleanup(func() {
				rdb.Client.Del(ctx, rdb.Keys.Quota("m-3"))
				exec("DELETE FROM merchant_balance WHERE merchant_id = 'm-3'")
			})
		}, "m-3 redis remain -1 is below what policy reject allows", Overdraft},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Produced{Valid: append([]event.PaymentSucceeded(nil), good.Valid...), Invalid: good.Invalid}
			s := state
			s.DLQ = append([]dlq.Record(nil), state.DLQ...)
			tt.mutate(&p, &s)
			r, err := Check(ctx, p, s)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() || !strings.Contains(r.String(), tt.want) || len(r.Broken) != 1 || !r.Broken[tt.broken] {
				t.Fatalf("want a violation of %s with %q, got %v:\n%s", tt.broken, tt.want, r.Broken, r)
			}
		})
	}

	// Redis drift, a leftover pending entry, and a balance row that disagrees with the ledger.
	rdb.Client.HSet(ctx, rdb.Keys.Quota("m-2"), quota.FieldRemain, 6, quota.PendingField("e-9"), quota.FormatPending(1, time.Now()))
	exec("UPDATE merchant_balance SET credited = 11 WHERE merchant_id = 'm-1'")
	drifted := state
	drifted.Drifted = []string{"m-2"} // declared: its drift is not reported, the others' still are
	if r, err = Check(ctx, good, drifted); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.String(), "m-2 redis") || !strings.Contains(r.String(), "m-1 redis remain 7") {
		t.Errorf("with m-2 declared drifted, want m-1's drift only:\n%s", r)
	}
	r, err = Check(ctx, good, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"m-2 redis remain 6", "pending p:e-9", "m-1 balance row 11/3 seq 3 != its ledger replayed 10/3 seq 3"} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("missing %q in:\n%s", want, r)
		}
	}
	if !r.Broken[Redis] || !r.Broken[Balances] {
		t.Errorf("broken %v, want redis and balances:\n%s", r.Broken, r)
	}
}

// The ledger replayed in seq order (ledger.Replay) is what the balance rows
// and balance_after values must say: rows out of order, or a gap in seq, are
// found.
func TestCheckFollowsLedgerOrder(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate []string
		want   string
	}{
		{"rows out of ledger order", []string{ // seq is unique per merchant: one row at a time
			"UPDATE quota_ledger SET seq = 99 WHERE event_id = 'g-1'",
			"UPDATE quota_ledger SET seq = 1 WHERE event_id = 'e-1'",
			"UPDATE quota_ledger SET seq = 2 WHERE event_id = 'g-1'"},
			"debit e-1 of 3 at balance 0: policy reject does not cover it"},
		{"a gap in the ledger's seq", []string{"UPDATE quota_ledger SET seq = 7 WHERE event_id = 'e-1'"},
			"row e-1 has seq 7 where 2 is next"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := testenv.NewMySQL(t)
			for _, q := range append([]string{
				"INSERT INTO merchant_balance (merchant_id, credited, debited, seq) VALUES ('m-1', 10, 3, 2)",
				`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, occurred_at, seq) VALUES
					(1, 'g-1', 'm-1', 'credit', 10, 10, NOW(), 1), (2, 'e-1', 'm-1', 'debit', 3, 7, NOW(), 2)`,
			}, tt.mutate...) {
				if err := db.DB.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
			r, err := Check(context.Background(), Produced{Valid: []event.PaymentSucceeded{ev("e-1", "m-1", 3)}}, State{DB: db.DB})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Broken[Balances] || !strings.Contains(r.String(), tt.want) {
				t.Fatalf("want a balances violation with %q:\n%s", tt.want, r)
			}
		})
	}
}
