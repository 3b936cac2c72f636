package ledger

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestDecideRefund(t *testing.T) {
	none := func(string) bool { return false }
	gone := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	ab := Burn{Amount: 10, Parts: []Part{{"a", 4}, {"b", 6}}}
	over := Burn{Amount: 10, Parts: []Part{{"a", 6}}, Overage: 4}
	debt := Burn{Amount: 10, Parts: []Part{{"a", 7}}} // 3 owed under floor
	tests := []struct {
		name        string
		burn        Burn
		already     int64
		amount      int64
		outstanding int64
		ended       func(string) bool
		want        Refunded
	}{
		{"last burned comes back first", ab, 0, 5, 0, none,
			Refunded{Taken: 5, Returned: []Part{{"b", 5}}}},
		{"whole refund in reverse burn-down order", ab, 0, 10, 0, none,
			Refunded{Taken: 10, Returned: []Part{{"b", 6}, {"a", 4}}}},
		{"partial refunds add up: the second continues where the first stopped", ab, 5, 3, 0, none,
			Refunded{Taken: 3, Returned: []Part{{"b", 1}, {"a", 2}}}},
		{"beyond the debit is a conflict, never a credit", ab, 8, 5, 0, none,
			Refunded{Taken: 2, Returned: []Part{{"a", 2}}, Beyond: 3}},
		{"nothing left: all beyond", ab, 10, 1, 0, none,
			Refunded{Beyond: 1}},
		{"an expired grant's units stay gone", ab, 0, 10, 0, gone("b"),
			Refunded{Taken: 10, Returned: []Part{{"a", 4}}, Expired: 6}},
		{"every grant expired: nothing comes back", ab, 0, 10, 0, gone("a", "b"),
			Refunded{Taken: 10, Expired: 10}},
		{"overage first, while owed", over, 0, 3, 4, none,
			Refunded{Taken: 3, Returned: []Part{{"", 3}}}},
		{"overage then the grant", over, 0, 10, 4, none,
			Refunded{Taken: 10, Returned: []Part{{"", 4}, {"a", 6}}}},
		{"overage billed since: nothing of it comes back", over, 0, 5, 0, none,
			Refunded{Taken: 5, Returned: []Part{{"a", 1}}, Billed: 4}},
		{"overage partly billed", over, 0, 4, 1, none,
			Refunded{Taken: 4, Returned: []Part{{"", 1}}, Billed: 3}},
		{"a floor debt comes back to the balance first", debt, 0, 5, 0, none,
			Refunded{Taken: 5, Returned: []Part{{"", 3}, {"a", 2}}}},
		{"owed in full, no grant", Burn{Amount: 5}, 0, 5, 0, none,
			Refunded{Taken: 5, Returned: []Part{{"", 5}}}},
		{"after the overage was refunded, the grant", over, 4, 2, 4, none,
			Refunded{Taken: 2, Returned: []Part{{"a", 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideRefund(tt.burn, tt.already, tt.amount, tt.outstanding, tt.ended)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecideRefund = %+v, want %+v", got, tt.want)
			}
			if got.Taken+got.Beyond != tt.amount {
				t.Errorf("taken %d + beyond %d != amount %d", got.Taken, got.Beyond, tt.amount)
			}
			if got.Total()+got.Expired+got.Billed != got.Taken {
				t.Errorf("returned %d + expired %d + billed %d != taken %d", got.Total(), got.Expired, got.Billed, got.Taken)
			}
		})
	}
}

// TestRefundsNeverExceedTheDebit: whatever the split, the refunds of one
// payment return each unit at most once.
func TestRefundsNeverExceedTheDebit(t *testing.T) {
	b := Burn{Amount: 17, Parts: []Part{{"a", 5}, {"b", 7}}, Overage: 5}
	for _, split := range [][]int64{{17}, {1, 16}, {5, 5, 5, 5}, {3, 20}, {17, 1}} {
		var already, total int64
		back := map[string]int64{}
		for _, n := range split {
			r := DecideRefund(b, already, n, 5-back[""], func(string) bool { return false })
			already += r.Taken
			total += r.Total()
			for _, p := range r.Returned {
				back[p.GrantID] += p.Amount
			}
		}
		if already > b.Amount || total > b.Amount || back["a"] > 5 || back["b"] > 7 || back[""] > 5 {
			t.Errorf("split %v: taken %d, returned %v", split, already, back)
		}
	}
}

func TestBookRefund(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tmpl := Row{EventID: "refund:r1", MerchantID: "m", Reason: ReasonRefund, OccurredAt: t0, CreatedAt: t0}
	grant := func(id string, amount, rem int64, prio int, st GrantState) Grant {
		return Grant{ID: id, MerchantID: "m", Amount: amount, Remaining: rem, Priority: prio, State: st, CreatedAt: t0}
	}
	type want struct {
		rows      []string // kind:amount
		remaining map[string]int64
		head      string
	}
	tests := []struct {
		name   string
		bal    Balance
		grants []Grant
		r      Refunded
		want   want
	}{
		{"a used grant is active again and is the head", Balance{Credited: 20, Debited: 15},
			[]Grant{grant("a", 10, 0, 1, GrantUsed), grant("b", 10, 5, 2, GrantActive)},
			Refunded{Taken: 4, Returned: []Part{{"a", 4}}},
			want{[]string{"refund:4"}, map[string]int64{"a": 4, "b": 5}, "a"}},
		{"a floor debt is paid back first", Balance{Credited: 10, Debited: 13, PolicyKind: PolicyFloor, OverdraftFloor: 5},
			[]Grant{grant("a", 10, 0, 1, GrantUsed)},
			Refunded{Taken: 5, Returned: []Part{{"a", 5}}},
			want{[]string{"refund:5"}, map[string]int64{"a": 2}, "a"}},
		{"overage of other payments is billed before grant units come back", Balance{Credited: 10, Debited: 18, PolicyKind: PolicyOverage},
			[]Grant{grant("a", 10, 0, 1, GrantUsed)},
			Refunded{Taken: 9, Returned: []Part{{"", 3}, {"a", 6}}},
			want{[]string{"refund:3", "billed:5", "refund:6"}, map[string]int64{"a": 6}, "a"}},
		{"overage back alone: no billing", Balance{Credited: 10, Debited: 18, PolicyKind: PolicyOverage},
			[]Grant{grant("a", 10, 0, 1, GrantUsed)},
			Refunded{Taken: 3, Returned: []Part{{"", 3}}},
			want{[]string{"refund:3"}, map[string]int64{"a": 0}, ""}},
		{"owed units past zero are adopted", Balance{Credited: 20, Debited: 15},
			[]Grant{grant("b", 10, 5, 2, GrantActive)},
			Refunded{Taken: 3, Returned: []Part{{"", 3}}},
			want{[]string{"refund:3"}, map[string]int64{"b": 5, "opening:m@15": 3}, "b"}},
		{"nothing back: nothing booked", Balance{Credited: 20, Debited: 15},
			[]Grant{grant("b", 10, 5, 2, GrantActive)},
			Refunded{Taken: 3, Expired: 3},
			want{[]string{"refund:0"}, map[string]int64{"b": 5}, "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.bal.MerchantID = "m"
			bk := NewBook(tt.bal)
			for _, g := range tt.grants {
				bk.Read(g, tt.bal.Debited)
			}
			bk.Sort()
			rows := BookRefund(bk, tt.r, tmpl, t0)
			var got []string
			var credited int64
			for _, r := range rows {
				got = append(got, string(r.Kind)+":"+strconv.FormatInt(r.Amount, 10))
				credited += r.Amount
			}
			if !reflect.DeepEqual(got, tt.want.rows) {
				t.Errorf("rows = %v, want %v", got, tt.want.rows)
			}
			rem := map[string]int64{}
			var sum int64
			for _, g := range bk.Grants {
				rem[g.ID] = g.Remaining
				sum += g.Remaining
			}
			if !reflect.DeepEqual(rem, tt.want.remaining) {
				t.Errorf("remaining = %v, want %v", rem, tt.want.remaining)
			}
			if avail := tt.bal.Available() + credited; sum != max(avail, 0) {
				t.Errorf("grants sum to %d, balance is %d", sum, avail)
			}
			head, _, ok := Head(bk.Grants)
			if ok != (tt.want.head != "") || ok && head.ID != tt.want.head {
				t.Errorf("head = %q, want %q", head.ID, tt.want.head)
			}
		})
	}
}
