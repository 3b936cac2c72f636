package ledger

import (
	"strconv"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// Replay, the reference model: a merchant's rows in seq order from nothing,
// whatever order they come in, to its totals, balance_after values, events
// and what no ledger may hold.
func TestReplay(t *testing.T) {
	seq := func(n int64) *int64 { return &n }
	row := func(id string, kind Kind, amount int64, s int64) Row {
		r := Row{EventID: id, MerchantID: "m", Kind: kind, Amount: amount, Reason: ReasonPayment}
		if s > 0 {
			r.Seq = seq(s)
		}
		if kind == KindRejected {
			r.Reason = ReasonInsufficient
		}
		return r
	}
	overage := Balance{MerchantID: "m", PolicyKind: PolicyOverage}
	units := int64(50)
	alerted := Balance{MerchantID: "m", LowUnits: &units}
	tests := []struct {
		name     string
		rows     []Row
		settings Balance
		after    string // balance after each row, in seq order
		events   string
		faults   string
	}{
		{"rows out of order are replayed in seq order",
			[]Row{row("e-2", KindDebit, 30, 3), row("g", KindCredit, 100, 1), row("e-1", KindDebit, 30, 2)},
			alerted, "100 70 40", "g/quota.granted e-2/quota.low/50", ""},
		{"an unknown merchant's rejection moves nothing; the first grant recovers nothing",
			[]Row{{EventID: "e-0", MerchantID: "m", Kind: KindRejected, Amount: 5, Reason: ReasonUnknownMerchant}, row("g", KindCredit, 10, 1)},
			alerted, "10", "g/quota.granted", ""},
		{"a debit the policy does not cover",
			[]Row{row("g", KindCredit, 10, 1), row("e-1", KindDebit, 20, 2)},
			Balance{MerchantID: "m"}, "10 -10", "g/quota.granted e-1/quota.depleted/0", "debit e-1 of 20 at balance 10: policy reject does not cover it"},
		{"a rejection the balance covered",
			[]Row{row("g", KindCredit, 10, 1), row("e-1", KindRejected, 5, 2)},
			Balance{MerchantID: "m"}, "10 10", "g/quota.granted", "payment e-1 of 5 rejected at balance 10: policy reject covers it"},
		{"a gap in seq",
			[]Row{row("g", KindCredit, 10, 1), row("e-1", KindDebit, 5, 3)},
			Balance{MerchantID: "m"}, "10 5", "g/quota.granted", "row e-1 has seq 3 where 2 is next"},
		{"billed overage taken off before a grant",
			[]Row{row("g-1", KindCredit, 10, 1), {EventID: "e-1", MerchantID: "m", Kind: KindDebit, Amount: 15, Overage: 5, Seq: seq(2)},
				{EventID: BilledID("g-2"), MerchantID: "m", Kind: KindBilled, Amount: 5, Seq: seq(3)}, row("g-2", KindCredit, 10, 4)},
			overage, "10 -5 0 10", "g-1/quota.granted billed:g-2/quota.overage_billed g-2/quota.granted", ""},
		{"billed overage repaid by a grant",
			[]Row{row("g-1", KindCredit, 10, 1), {EventID: "e-1", MerchantID: "m", Kind: KindDebit, Amount: 15, Overage: 5, Seq: seq(2)}, row("g-2", KindCredit, 10, 3)},
			overage, "10 -5 5", "g-1/quota.granted g-2/quota.granted",
			"grant g-2 credited at balance -5 under overage: billed units repaid (a billed row must come first)"},
		{"a revoke takes the remainder off like an expiry",
			[]Row{row("g", KindCredit, 100, 1), row("e-1", KindDebit, 30, 2),
				{EventID: RevokeID("g"), MerchantID: "m", Kind: KindExpire, Amount: 70, Reason: ReasonRevoked, Seq: seq(3)}},
			alerted, "100 70 0", "g/quota.granted revoke:g/quota.expired revoke:g/quota.low/50 revoke:g/quota.depleted/0", ""},
		{"a refund gives back and recovers across a level, its base unchanged",
			[]Row{row("g", KindCredit, 100, 1), row("e-1", KindDebit, 60, 2),
				{EventID: RefundRowID("r-1"), MerchantID: "m", Kind: KindRefund, Amount: 20, Reason: ReasonRefund, Seq: seq(3)}},
			alerted, "100 40 60", "g/quota.granted e-1/quota.low/50 refund:r-1/quota.refunded refund:r-1/quota.recovered/50", ""},
		{"a wrong overage",
			[]Row{row("g", KindCredit, 10, 1), {EventID: "e-1", MerchantID: "m", Kind: KindDebit, Amount: 15, Seq: seq(2)}},
			overage, "10 -5", "g/quota.granted", "debit e-1 records overage 0, want 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Replay(tt.rows, map[string]Balance{"m": tt.settings}, quotaevent.Alerts{})["m"]
			var after, events []string
			for _, a := range got.After {
				after = append(after, strconv.FormatInt(a, 10))
			}
			for _, e := range got.Events {
				events = append(events, e.ID)
			}
			if s := strings.Join(after, " "); s != tt.after {
				t.Errorf("after %q, want %q", s, tt.after)
			}
			if s := strings.Join(events, " "); s != tt.events {
				t.Errorf("events %q, want %q", s, tt.events)
			}
			if s := strings.Join(got.Faults, "; "); s != tt.faults {
				t.Errorf("faults %q, want %q", s, tt.faults)
			}
		})
	}
}
