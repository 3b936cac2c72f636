package ledger

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func str(s string) *string { return &s }

func TestTakenTotals(t *testing.T) {
	rows := []Row{
		{MerchantID: "b", Kind: KindDebit, Amount: 5}, {MerchantID: "a", Kind: KindCredit, Amount: 7},
		{MerchantID: "b", Kind: KindExpire, Amount: 2}, {MerchantID: "c", Kind: KindRejected, Amount: 9},
		{MerchantID: "a", Kind: KindBilled, Amount: 1}, {MerchantID: "b", Kind: KindRejected, Amount: 4},
	}
	totals, merchants := TakenTotals(rows)
	if want := map[string]int64{"a": -8, "b": 7, "c": 0}; !reflect.DeepEqual(totals, want) {
		t.Errorf("totals %v, want %v", totals, want)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(merchants, want) {
		t.Errorf("merchants %v, want %v", merchants, want)
	}
}

func TestSequence(t *testing.T) {
	type out struct {
		after, seq *int64
		overage    int64
	}
	for _, tc := range []struct {
		name string
		rows []Row
		bal  Balance // after the rows
		want []out
	}{
		{"debits walk down from the balance before",
			[]Row{{MerchantID: "m", Kind: KindDebit, Amount: 3}, {MerchantID: "m", Kind: KindDebit, Amount: 4}},
			Balance{MerchantID: "m", Credited: 10, Debited: 7, Seq: 5},
			[]out{{ptr(7), ptr(4), 0}, {ptr(3), ptr(5), 0}}},
		{"a rejection moves nothing but takes a seq",
			[]Row{{MerchantID: "m", Kind: KindRejected, Amount: 30}, {MerchantID: "m", Kind: KindDebit, Amount: 1}},
			Balance{MerchantID: "m", Credited: 10, Debited: 1, Seq: 2},
			[]out{{ptr(10), ptr(1), 0}, {ptr(9), ptr(2), 0}}},
		{"overage: the part below zero",
			[]Row{{MerchantID: "m", Kind: KindDebit, Amount: 3}, {MerchantID: "m", Kind: KindDebit, Amount: 4}},
			Balance{MerchantID: "m", Credited: 5, Debited: 7, Seq: 2, PolicyKind: PolicyOverage},
			[]out{{ptr(2), ptr(1), 0}, {ptr(-2), ptr(2), 2}}},
		{"credits and expiries",
			[]Row{{MerchantID: "m", Kind: KindExpire, Amount: 2}, {MerchantID: "m", Kind: KindCredit, Amount: 5}},
			Balance{MerchantID: "m", Credited: 15, Debited: 2, Seq: 3},
			[]out{{ptr(8), ptr(2), 0}, {ptr(13), ptr(3), 0}}},
		{"an unknown merchant gets neither",
			[]Row{{MerchantID: "x", Kind: KindRejected, Amount: 1, Overage: 9}},
			Balance{MerchantID: "m"},
			[]out{{nil, nil, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken, _ := TakenTotals(tc.rows)
			Sequence(tc.rows, []Balance{tc.bal}, taken)
			for i, r := range tc.rows {
				if got := (out{r.BalanceAfter, r.Seq, r.Overage}); !reflect.DeepEqual(got, tc.want[i]) {
					t.Errorf("row %d: after %v seq %v overage %d, want %v %v %d", i, deref(r.BalanceAfter), deref(r.Seq), r.Overage,
						deref(tc.want[i].after), deref(tc.want[i].seq), tc.want[i].overage)
				}
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestDecideCredits(t *testing.T) {
	credit := func(id, m string, amount int64) Row {
		return Row{EventID: id, MerchantID: m, Kind: KindCredit, Amount: amount, Reason: ReasonGrant, OccurredAt: t0}
	}
	existing := map[string]Row{"old": credit("old", "m", 5), "debit": {EventID: "debit", MerchantID: "m", Kind: KindDebit, Amount: 5}}
	want := []Row{credit("new", "m", 5), credit("old", "m", 5), credit("old", "m", 6), credit("debit", "m", 5),
		credit("new", "m", 5), credit("new", "n", 5), credit("", "m", 5)}
	out, fresh := DecideCredits(want, existing)
	for i, tc := range []struct {
		dup  bool
		is   error
		name string
	}{
		{name: "fresh"}, {name: "recorded before", dup: true}, {name: "another amount", is: ErrConflict},
		{name: "recorded as a debit", is: ErrConflict}, {name: "earlier in the batch", dup: true},
		{name: "earlier in the batch for another merchant", is: ErrConflict}, {name: "no id", is: ErrRefused},
	} {
		if out[i].Duplicate != tc.dup || !errors.Is(out[i].Err, tc.is) || (tc.is == nil) != (out[i].Err == nil) {
			t.Errorf("%s: %+v, want duplicate %v, error %v", tc.name, out[i], tc.dup, tc.is)
		}
	}
	if len(fresh) != 1 || fresh[0].EventID != "new" || fresh[0].MerchantID != "m" {
		t.Errorf("fresh %+v, want the first credit only", fresh)
	}
}

func TestBilled(t *testing.T) {
	first := Row{EventID: "g-1", Source: "plan", OccurredAt: t0, CreatedAt: t0}
	for _, tc := range []struct {
		name  string
		bal   Balance // after the credits
		taken int64
		owed  int64 // 0: none billed
	}{
		{"overage below zero before the credit", Balance{MerchantID: "m", Credited: 100, Debited: 130, PolicyKind: PolicyOverage}, -100, 130},
		{"overage at zero", Balance{MerchantID: "m", Credited: 100, Debited: 0, PolicyKind: PolicyOverage}, -100, 0},
		{"floor: owed is paid back, not billed", Balance{MerchantID: "m", Credited: 100, Debited: 130, PolicyKind: PolicyFloor, OverdraftFloor: 50}, -100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := Billed(tc.bal, tc.taken, first)
			if ok != (tc.owed > 0) || r.Amount != tc.owed {
				t.Fatalf("billed %+v (%v), want %d", r, ok, tc.owed)
			}
			if ok && (r.Kind != KindBilled || r.EventID != BilledID("g-1") || *r.GrantID != "g-1" || r.Source != "plan") {
				t.Errorf("billed row %+v", r)
			}
		})
	}
}

func TestBookExpire(t *testing.T) {
	past, future := t0.Add(-time.Hour), t0.Add(time.Hour)
	start := t0.Add(-25 * time.Hour)
	bk := NewBook(Balance{MerchantID: "m", Credited: 30})
	bk.Read(Grant{ID: "due", MerchantID: "m", Amount: 10, Remaining: 8, StartsAt: start, ExpiresAt: &past, RolloverMax: 5, State: GrantActive}, 0)
	bk.Read(Grant{ID: "spent", MerchantID: "m", Amount: 10, Remaining: 0, StartsAt: start, ExpiresAt: &past, State: GrantActive}, 0)
	bk.Read(Grant{ID: "later", MerchantID: "m", Amount: 10, Remaining: 10, ExpiresAt: &future, State: GrantActive}, 0)
	bk.Sort()
	rows := bk.Expire(t0)
	if len(rows) != 2 || rows[0].Kind != KindExpire || rows[0].EventID != ExpireID("due") || rows[0].Amount != 8 ||
		!rows[0].OccurredAt.Equal(past) || rows[1].Kind != KindCredit || rows[1].Reason != ReasonRollover || rows[1].Amount != 5 {
		t.Fatalf("rows %+v, want the expiry of 8 and a rollover of 5", rows)
	}
	if taken, credited := ExpirySums(rows); taken != 8 || credited != 5 {
		t.Errorf("sums %d, %d; want 8, 5", taken, credited)
	}
	var ids []string
	for _, g := range bk.Grants {
		ids = append(ids, g.ID)
	}
	rollover := DerivedID("rollover:", "due")
	if want := []string{"later", rollover}; !reflect.DeepEqual(ids, want) { // the earlier expiry first
		t.Errorf("active %v, want %v", ids, want)
	}
	changed := map[string]Grant{}
	for _, g := range bk.Changes(t0) {
		changed[g.ID] = g
	}
	if len(changed) != 3 || changed["due"].State != GrantExpired || changed["due"].Remaining != 0 ||
		changed["spent"].State != GrantExpired || changed[rollover].Remaining != 5 {
		t.Errorf("changes %+v, want both expired grants and the rollover", changed)
	}
}

func TestPayDebits(t *testing.T) {
	end := int64(20)
	bals := []Balance{
		{MerchantID: "hot", Debited: 15, HeadGrant: str("h"), HeadEnd: &end}, // the head paid it all
		{MerchantID: "slow", Credited: 10, Debited: 12, HeadGrant: str("a"), HeadEnd: ptr(4)},
		{MerchantID: "idle", Debited: 30, HeadEnd: &end},
	}
	rows := []Row{
		{EventID: "h1", MerchantID: "hot", Kind: KindDebit, Amount: 5, GrantID: str("stale")},
		{EventID: "s1", MerchantID: "slow", Kind: KindDebit, Amount: 3},
		{EventID: "s2", MerchantID: "slow", Kind: KindDebit, Amount: 5},
		{EventID: "r1", MerchantID: "slow", Kind: KindRejected, Amount: 50},
		{EventID: "s3", MerchantID: "slow", Kind: KindDebit, Amount: 4},
	}
	debits := map[string]int64{"hot": 5, "slow": 12}
	slow := ByHead(rows, bals, debits)
	if len(slow) != 1 || slow[0].MerchantID != "slow" || *rows[0].GrantID != "h" {
		t.Fatalf("slow %+v, hot row names %v", slow, rows[0].GrantID)
	}
	bk := NewBook(slow[0])
	bk.Read(Grant{ID: "a", MerchantID: "slow", Amount: 6, Remaining: 6, Priority: 1, State: GrantActive}, 0) // head: 4 - 0
	bk.Read(Grant{ID: "b", MerchantID: "slow", Amount: 6, Remaining: 6, Priority: 2, State: GrantActive}, 0)
	bk.Sort()
	split := PayDebits(rows, map[string]*Book{"slow": bk}, debits, t0)
	// a (4 left, by the head) pays s1 and 1 of s2; b pays 4 of s2 and 2 of s3; 2 of s3 owed.
	want := []Attribution{{"s2", Part{"a", 1}}, {"s2", Part{"b", 4}}, {"s3", Part{"b", 2}}}
	if !reflect.DeepEqual(split, want) {
		t.Errorf("split %v, want %v", split, want)
	}
	if *rows[1].GrantID != "a" || rows[2].GrantID != nil || rows[3].GrantID != nil || rows[4].GrantID != nil {
		t.Errorf("grant ids %v %v %v %v", rows[1].GrantID, rows[2].GrantID, rows[3].GrantID, rows[4].GrantID)
	}
	if id, end, _ := bk.HeadEnd(12); id != nil || end != NoHead {
		t.Errorf("head %v at %d, want none: every grant is used up", id, end)
	}
}

func TestBookRevoke(t *testing.T) {
	future := t0.Add(time.Hour)
	end := int64(15) // the head's remaining is head_end - debited: 15 - 5
	for _, tc := range []struct {
		name, id   string
		want       int64 // amount of the revoke row; 0: none
		wantActive []string
	}{
		{"remainder of the head leaves", "head", 10, []string{"other", "spent"}},
		{"remainder of another leaves", "other", 7, []string{"head", "spent"}},
		{"used up: nothing", "spent", 0, []string{"head", "other", "spent"}},
		{"not active (ended, unknown): nothing", "gone", 0, []string{"head", "other", "spent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bk := NewBook(Balance{MerchantID: "m", Credited: 22, Debited: 5, HeadGrant: str("head"), HeadEnd: &end})
			bk.Read(Grant{ID: "head", MerchantID: "m", Amount: 15, Remaining: 15, Priority: 1, State: GrantActive}, 5)
			bk.Read(Grant{ID: "other", MerchantID: "m", Amount: 7, Remaining: 7, Priority: 2, ExpiresAt: &future, RolloverMax: 7, State: GrantActive}, 5)
			bk.Read(Grant{ID: "spent", MerchantID: "m", Amount: 3, Remaining: 0, Priority: 3, State: GrantActive}, 5)
			bk.Sort()
			row, ok := bk.Revoke(tc.id, t0)
			if ok != (tc.want > 0) || row.Amount != tc.want {
				t.Fatalf("row %+v, %v; want amount %d", row, ok, tc.want)
			}
			var ids []string
			for _, g := range bk.Grants {
				ids = append(ids, g.ID)
			}
			if !reflect.DeepEqual(ids, tc.wantActive) {
				t.Errorf("active %v, want %v", ids, tc.wantActive)
			}
			changed := map[string]Grant{}
			for _, g := range bk.Changes(t0) {
				changed[g.ID] = g
			}
			if !ok {
				return
			}
			if row.Kind != KindExpire || row.Reason != ReasonRevoked || row.EventID != "revoke:"+tc.id || *row.GrantID != tc.id || !row.OccurredAt.Equal(t0) {
				t.Errorf("row %+v, want an expire row revoke:%s, reason revoked, now", row, tc.id)
			}
			if g := changed[tc.id]; g.State != GrantExpired || g.Remaining != 0 || g.EndedAt == nil || !g.EndedAt.Equal(t0) {
				t.Errorf("revoked grant %+v, want expired now with nothing left", g)
			}
			if _, next, _ := Head(bk.Grants); tc.id == "other" && next != nil {
				t.Errorf("next expiry %v after revoking the only expiring grant", next)
			}
		})
	}
}
