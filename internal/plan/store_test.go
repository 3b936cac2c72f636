package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
)

// known gives merchants a balance row, as their first grant does.
func known(t *testing.T, db *testenv.MySQL, merchants ...string) {
	t.Helper()
	for _, m := range merchants {
		if err := db.DB.Exec("INSERT INTO merchant_balance (merchant_id) VALUES (?)", m).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// A merchant unknown to billing gets no plan; a plan is listed, and once
// cancelled is neither listed nor due.
func TestStoreSetListCancel(t *testing.T) {
	db := testenv.NewMySQL(t)
	store := NewStore(db.SQL)
	ctx := context.Background()
	anchor := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	hourly := func(m string) Plan {
		return Plan{MerchantID: m, Amount: 10, Every: Every{Duration: time.Hour}, Priority: 50, Anchor: anchor}
	}
	if err := store.Set(ctx, hourly("m-unknown")); !errors.Is(err, ledger.ErrUnknownMerchant) {
		t.Fatalf("Set of an unknown merchant = %v, want ErrUnknownMerchant", err)
	}
	if _, err := store.Cancel(ctx, "m-unknown"); !errors.Is(err, ledger.ErrUnknownMerchant) {
		t.Fatalf("Cancel of an unknown merchant = %v, want ErrUnknownMerchant", err)
	}
	known(t, db, "m-a", "m-b", "m-c")
	for _, m := range []string{"m-c", "m-a", "m-b"} {
		if err := store.Set(ctx, hourly(m)); err != nil {
			t.Fatal(err)
		}
	}
	merchants := func(ps []Plan) (out []string) {
		for _, p := range ps {
			out = append(out, p.MerchantID)
		}
		return out
	}
	if ps, err := store.List(ctx); err != nil || len(ps) != 3 || ps[0].MerchantID != "m-a" || ps[2].MerchantID != "m-c" || ps[0].Amount != 10 {
		t.Fatalf("listed %v (%v), want m-a, m-b, m-c", merchants(ps), err)
	}
	if had, err := store.Cancel(ctx, "m-b"); err != nil || !had {
		t.Fatalf("Cancel = %v, %v", had, err)
	}
	if had, err := store.Cancel(ctx, "m-b"); err != nil || had {
		t.Fatalf("second Cancel = %v, %v; want nothing to cancel", had, err)
	}
	due, _, err := store.Due(ctx, 10)
	if err != nil || len(due) != 2 || due[0].MerchantID == "m-b" || due[1].MerchantID == "m-b" {
		t.Fatalf("due after cancel: %v (%v)", merchants(due), err)
	}
	if ps, err := store.List(ctx); err != nil || len(ps) != 2 {
		t.Fatalf("listed after cancel: %v (%v)", merchants(ps), err)
	}
	if d, ok, err := store.UntilNextPeriod(ctx); err != nil || !ok || d > 0 {
		t.Fatalf("next period in %v (%v, %v), want one due", d, ok, err)
	}
	for _, m := range []string{"m-a", "m-c"} {
		if _, err := store.Cancel(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := store.UntilNextPeriod(ctx); err != nil || ok {
		t.Fatalf("next period without plans: %v, %v; want none", ok, err)
	}
}
