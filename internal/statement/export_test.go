package statement_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/statement"
)

// A statement per merchant: opening, the period's rows in seq order, totals
// by kind, closing; a merchant without rows too; the trailer counts them and
// hashes everything before it; the job lock is given back.
func TestExportJSONL(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2"}, 4)
	if _, err := e.db.SQL.Exec("INSERT INTO merchant_balance (merchant_id) VALUES ('m-0')"); err != nil {
		t.Fatal(err)
	}
	sum, err := e.export(t.Context(), e.db.SQL, statement.Options{Period: hours(2, 4)})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(e.dir, "statements-20261101T020000Z-20261101T040000Z.jsonl"); sum.Path != want || !slices.Equal(files(t, e.dir), []string{want}) {
		t.Fatalf("wrote %s, the directory holds %v; want only %s", sum.Path, files(t, e.dir), want)
	}
	var got []string
	for _, r := range records(t, sum.Path) {
		switch r["record"] {
		case "export":
			got = append(got, "export "+r["from"].(string)+" "+r["to"].(string))
		case "opening", "closing":
			got = append(got, r["record"].(string)+" "+r["merchant_id"].(string)+" "+num(r["balance"]))
		case "row":
			got = append(got, "row "+r["merchant_id"].(string)+" "+num(r["seq"])+" "+r["kind"].(string)+" "+num(r["amount"])+" "+num(r["balance_after"]))
		case "totals":
			got = append(got, "totals "+r["merchant_id"].(string)+" "+num(r["rows"])+" "+kinds(r["by_kind"]))
		case "trailer":
			got = append(got, "trailer "+num(r["merchants"])+" "+num(r["rows"])+" "+kinds(r["by_kind"]))
		}
	}
	want := []string{
		"export 2026-11-01T02:00:00Z 2026-11-01T04:00:00Z",
		"opening m-0 0", "totals m-0 0 ", "closing m-0 0",
		"opening m-1 99", "row m-1 3 rejected 1000 99", "row m-1 4 debit 2 97", "totals m-1 2 debit=1/2 rejected=1/1000", "closing m-1 97",
		"opening m-2 99", "row m-2 3 rejected 1000 99", "row m-2 4 debit 2 97", "totals m-2 2 debit=1/2 rejected=1/1000", "closing m-2 97",
		"trailer 3 4 debit=2/4 rejected=2/2000",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("export:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n, err := e.redis.Client.Keys(t.Context(), e.redis.Keys.Prefix()+"*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("keys left: %v, %v", n, err)
	}
}

// The CSV export holds the same records, one header for all.
func TestExportCSV(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2"}, 4)
	out := filepath.Join(e.dir, "m1.csv")
	sum, err := e.export(t.Context(), e.db.SQL, statement.Options{Period: hours(0, 3), Merchants: []string{"m-1"}, Format: statement.FormatCSV, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	body := data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1]
	if h := sha256.Sum256(body); hex.EncodeToString(h[:]) != sum.Trailer.SHA256 {
		t.Fatalf("the lines before the trailer hash to %x, the trailer says %s", h, sum.Trailer.SHA256)
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs[1:] {
		got = append(got, strings.TrimRight(strings.Join(r, ","), ","))
	}
	if len(got) != 15 || recs[0][0] != "record" || got[1] != "opening,m-1,,,,,,,0" || !strings.HasPrefix(got[2], "row,m-1,1,1000001,g-m-1,credit,,100,100,grant,") ||
		!strings.HasPrefix(got[4], "row,m-1,3,") || got[6] != "total,m-1,,,,debit,1,1" || got[8] != "total,m-1,,,,,3" || got[9] != "closing,m-1,,,,,,,99" ||
		got[13] != "total,,,,,,3" || got[14] != "trailer,,,,,,3,,,,,,,,,,,,,1,"+sum.Trailer.SHA256 {
		t.Fatalf("csv:\n%s", strings.Join(got, "\n"))
	}
}

// A corrupted row stops the export naming its merchant; nothing is left.
func TestExportCorruptedRow(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2", "m-3"}, 4)
	if _, err := e.db.SQL.Exec("UPDATE quota_ledger SET amount = amount + 1 WHERE merchant_id = 'm-2' AND seq = 5"); err != nil {
		t.Fatal(err)
	}
	_, err := e.export(t.Context(), e.db.SQL, statement.Options{Period: hours(2, 4)})
	var te *ledger.TieOutError
	if !errors.As(err, &te) || te.MerchantID != "m-2" || te.Seq != 5 {
		t.Fatalf("err = %v, want the tie-out error of m-2 at seq 5", err)
	}
	if f := files(t, e.dir); len(f) != 0 {
		t.Fatalf("left behind: %v", f)
	}
}

// A balance row that moved without its ledger row (seq 5 is after the
// period) fails the check of the balance at "now".
func TestExportBalanceDisagrees(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1", "m-2"}, 4)
	if _, err := e.db.SQL.Exec("UPDATE merchant_balance SET debited = debited + 1 WHERE merchant_id = 'm-1'"); err != nil {
		t.Fatal(err)
	}
	_, err := e.export(t.Context(), e.db.SQL, statement.Options{Period: hours(0, 2), Format: statement.FormatCSV})
	var te *ledger.TieOutError
	if !errors.As(err, &te) || te.MerchantID != "m-1" || !strings.Contains(err.Error(), "merchant_balance has 89") {
		t.Fatalf("err = %v, want the tie-out error of m-1 against merchant_balance", err)
	}
}

// A period that has not ended (less the settle time) is refused; so is a
// merchant unknown to billing.
func TestExportRefuses(t *testing.T) {
	e := newEnv(t)
	e.seed(t, []string{"m-1"}, 1)
	_, err := e.export(t.Context(), e.db.SQL, statement.Options{Period: ledger.Period{From: base, To: base.AddDate(100, 0, 0)}})
	if !errors.Is(err, statement.ErrPeriodOpen) {
		t.Fatalf("a period in the future: %v", err)
	}
	_, err = e.export(t.Context(), e.db.SQL, statement.Options{Period: hours(0, 1), Merchants: []string{"m-1", "m-9"}})
	if !errors.Is(err, ledger.ErrUnknownMerchant) || !strings.Contains(err.Error(), "m-9") {
		t.Fatalf("an unknown merchant: %v", err)
	}
	if f := files(t, e.dir); len(f) != 0 {
		t.Fatalf("left behind: %v", f)
	}
}

func num(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return "?"
}

func kinds(v any) string {
	m, _ := v.(map[string]any)
	var out []string
	for k, t := range m {
		tt := t.(map[string]any)
		out = append(out, k+"="+num(tt["count"])+"/"+num(tt["amount"]))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
