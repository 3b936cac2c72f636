package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// An idle merchant's grant expires by the worker's own loop: the expire row
// is written, the loaded quota hash is dropped, and the relay publishes
// quota.expired.
func TestWorkerExpiresIdleMerchant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 2)
	events := g.kafka.Topic(t, 1)
	g.env["QUOTA_EVENTS_TOPIC"] = events
	w := g.start(1, Options{NoHTTP: true})
	exp := time.Now().Add(time.Second)
	prio := 1
	res, err := w.path.Deductor.GrantBatch(ctx, []event.GrantCommand{
		{GrantID: "g-short", MerchantID: "m-a", Amount: 10, Source: "plans", Priority: &prio, ExpiresAt: &exp},
		{GrantID: "g-long", MerchantID: "m-a", Amount: 5, Source: "plans"},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("grants: %v %+v", err, res)
	}
	// A payment loads the quota hash; the expiring grant (priority 1) pays it.
	pay := event.PaymentSucceeded{EventID: "p1", PaymentID: "pay-p1", MerchantID: "m-a", Amount: 1, Source: event.SourcePC, OccurredAt: time.Now().UTC()}
	if out, err := w.path.Deductor.Apply(ctx, []event.PaymentSucceeded{pay}); err != nil || out[0].BalanceAfter != 14 {
		t.Fatalf("payment: %+v, %v", out, err)
	}
	var sent int64
	for sent == 0 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		g.db.DB.Raw("SELECT COUNT(*) FROM quota_outbox WHERE type = 'quota.expired' AND sent_at IS NOT NULL").Scan(&sent)
	}
	var expired *quotaevent.Message
	for _, m := range g.kafka.ReadAll(ctx, t, events, 1) {
		var msg quotaevent.Message
		if err := json.Unmarshal(m.Value, &msg); err != nil {
			t.Fatal(err)
		}
		if msg.Type == quotaevent.Expired {
			expired = &msg
		}
	}
	if expired == nil || expired.CausedBy != "expire:g-short" || expired.BalanceBefore != 14 || expired.BalanceAfter != 5 || expired.MerchantID != "m-a" {
		t.Fatalf("quota.expired = %+v", expired)
	}
	v, err := w.path.Deductor.Show(ctx, "m-a")
	if err != nil {
		t.Fatal(err)
	}
	if v.Credited-v.Debited != 5 || v.Cached {
		t.Errorf("after the expiry: %+v; want 5 available and the hash dropped", v)
	}
}

// The loop sleeps until the earliest due time, at most periodsMaxSleep;
// something still due after a pass, or a failed read, waits periodsRetry.
func TestPeriodsSleep(t *testing.T) {
	at := func(d time.Duration, ok bool, err error) func(context.Context) (time.Duration, bool, error) {
		return func(context.Context) (time.Duration, bool, error) { return d, ok, err }
	}
	none := at(0, false, nil)
	for _, tc := range []struct {
		name string
		next []func(context.Context) (time.Duration, bool, error)
		want time.Duration
	}{
		{"nothing scheduled", []func(context.Context) (time.Duration, bool, error){none, none}, periodsMaxSleep},
		{"an expiry in 3s", []func(context.Context) (time.Duration, bool, error){at(3*time.Second, true, nil), none}, 3 * time.Second},
		{"the earlier of two", []func(context.Context) (time.Duration, bool, error){at(3*time.Second, true, nil), at(time.Second/2, true, nil)}, time.Second / 2},
		{"beyond the bound", []func(context.Context) (time.Duration, bool, error){at(time.Hour, true, nil), none}, periodsMaxSleep},
		{"still due", []func(context.Context) (time.Duration, bool, error){none, at(-time.Second, true, nil)}, periodsRetry},
		{"read failed", []func(context.Context) (time.Duration, bool, error){at(time.Hour, true, nil), at(0, false, errors.New("down"))}, periodsRetry},
	} {
		p := &periods{next: tc.next, log: zap.NewNop()}
		if got := p.sleep(context.Background()); got != tc.want {
			t.Errorf("%s: sleep %v, want %v", tc.name, got, tc.want)
		}
	}
}
