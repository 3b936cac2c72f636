package ledger

import (
	"testing"
	"time"
)

func TestRowCheck(t *testing.T) {
	ok := Row{EventID: "e", MerchantID: "m", Kind: KindDebit, Amount: 1, Reason: ReasonPayment, PaymentID: "pay-e", Source: "pc", OccurredAt: time.Now().UTC()}
	if err := ok.Check(); err != nil {
		t.Fatalf("valid row refused: %v", err)
	}
	for name, mutate := range map[string]func(*Row){
		"empty event":   func(r *Row) { r.EventID = "" },
		"long merchant": func(r *Row) { r.MerchantID = string(make([]byte, 65)) },
		"zero amount":   func(r *Row) { r.Amount = 0 },
		"bad kind":      func(r *Row) { r.Kind = "transfer" },
		"long source":   func(r *Row) { r.Source = "abcdefghijklmnopq" },
		"year 0":        func(r *Row) { r.OccurredAt = r.OccurredAt.AddDate(-r.OccurredAt.Year(), 0, 0) },
		"invalid utf-8": func(r *Row) { r.PaymentID = "\xff" },
	} {
		r := ok
		mutate(&r)
		if r.Check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
