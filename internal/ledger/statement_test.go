package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStatement(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	period := Period{From: t0, To: t0.Add(24 * time.Hour)}
	before, within, after := t0.Add(-time.Hour), t0.Add(time.Hour), t0.Add(25*time.Hour)
	row := func(seq int64, kind Kind, amount, bal int64, at time.Time) Row {
		return Row{ID: seq, EventID: "e" + string(rune('0'+seq)), MerchantID: "m", Kind: kind, Amount: amount,
			BalanceAfter: &bal, Seq: &seq, CreatedAt: at}
	}
	ledger := []Row{
		row(1, KindCredit, 100, 100, before),
		row(2, KindDebit, 30, 70, before),
		row(3, KindDebit, 20, 50, within),
		row(4, KindRejected, 80, 50, within),
		row(5, KindExpire, 50, 0, within),
		row(6, KindDebit, 5, -5, within),
		row(7, KindBilled, 5, 0, within),
		row(8, KindCredit, 40, 40, after),
	}
	bal := Balance{MerchantID: "m", Credited: 145, Debited: 105, Seq: 8}
	type want struct {
		opening, closing, rows int64
		totals                 map[Kind]KindTotal
		err                    string // in the *TieOutError, when set
	}
	clean := want{opening: 70, closing: 0, rows: 5, totals: map[Kind]KindTotal{
		KindDebit: {2, 25}, KindRejected: {1, 80}, KindExpire: {1, 50}, KindBilled: {1, 5}}}
	cases := []struct {
		name   string
		change func(rows []Row, b *Balance) []Row
		want   want
	}{
		{"ties out", nil, clean},
		{"a row recorded before its predecessor counts with it", func(rows []Row, _ *Balance) []Row {
			rows[1].CreatedAt, rows[2].CreatedAt = within, before
			rows[6].CreatedAt = before
			return rows
		}, want{opening: 100, closing: 0, rows: 6, totals: map[Kind]KindTotal{
			KindDebit: {3, 55}, KindRejected: {1, 80}, KindExpire: {1, 50}, KindBilled: {1, 5}}}},
		{"a corrupted amount", func(rows []Row, _ *Balance) []Row { rows[2].Amount = 21; return rows },
			want{err: "at seq 3: event e3 (debit 21) records balance_after 50, its predecessors make 49"}},
		{"a missing row", func(rows []Row, _ *Balance) []Row { return append(rows[:3], rows[4:]...) },
			want{err: "at seq 4: row 5 (event e5) has seq 5 where 4 was due"}},
		{"an unknown kind", func(rows []Row, _ *Balance) []Row { rows[3].Kind = "bonus"; return rows },
			want{err: `at seq 4: event e4 has kind "bonus"`}},
		{"a balance row that moved without a ledger row", func(rows []Row, b *Balance) []Row { b.Debited++; return rows },
			want{err: "the rows make a balance of 40 now, merchant_balance has 39"}},
		{"a balance row counting a row more", func(rows []Row, b *Balance) []Row { b.Seq++; return rows },
			want{err: "8 rows, merchant_balance.seq is 9"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, b := append([]Row(nil), ledger...), bal
			if c.change != nil {
				rows = c.change(rows, &b)
			}
			s := NewStatement("m", period)
			var err error
			for i := 0; i < len(rows) && err == nil; i++ {
				_, err = s.Add(&rows[i])
			}
			if err == nil {
				err = s.Finish(b)
			}
			var te *TieOutError
			if c.want.err != "" {
				if !errors.As(err, &te) || !errors.Is(err, ErrTieOut) || te.MerchantID != "m" || !strings.Contains(err.Error(), c.want.err) {
					t.Fatalf("err = %v, want a tie-out error of m with %q", err, c.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Opening != c.want.opening || s.Closing != c.want.closing || s.Rows != c.want.rows || len(s.Totals) != len(c.want.totals) {
				t.Fatalf("got opening %d closing %d rows %d totals %v, want %+v", s.Opening, s.Closing, s.Rows, s.Totals, c.want)
			}
			for k, tot := range c.want.totals {
				if s.Totals[k] != tot {
					t.Errorf("totals[%s] = %+v, want %+v", k, s.Totals[k], tot)
				}
			}
		})
	}
}

func TestPeriodPlace(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := Period{From: t0, To: t0.Add(time.Hour)}
	for _, c := range []struct {
		at   time.Time
		want Place
	}{{t0.Add(-time.Nanosecond), Before}, {t0, Before}, {t0.Add(time.Nanosecond), Within}, {t0.Add(time.Hour), Within}, {t0.Add(time.Hour + 1), After}} {
		if got := p.Place(c.at); got != c.want {
			t.Errorf("Place(%v) = %v, want %v", c.at, got, c.want)
		}
	}
}

// Every kind the schema allows moves the balance in a known way: a
// migration that adds a kind fails here until Movement has its line.
func TestEveryKindMoves(t *testing.T) {
	files, err := filepath.Glob("../../migrations/*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	slices.Sort(files)
	enum := regexp.MustCompile(`(?i)\bkind\s+ENUM\(([^)]*)\)`)
	var kinds []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range enum.FindAllSubmatch(b, -1) {
			kinds = strings.Split(strings.NewReplacer("'", "", " ", "").Replace(string(m[1])), ",")
		}
	}
	if len(kinds) < 5 {
		t.Fatalf("the schema's kinds: %v", kinds)
	}
	for _, k := range kinds {
		if _, ok := Kind(k).Movement(); !ok {
			t.Errorf("kind %s has no movement: a statement would refuse its rows", k)
		}
	}
}
