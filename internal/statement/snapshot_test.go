package statement_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/statement"
)

// Payments that land while an export runs are in none of it, even for the
// merchants of pages it has not read yet; it still ties out, and the next
// period's export holds them.
func TestExportWhileWriting(t *testing.T) {
	e := newEnv(t)
	merchants := []string{"m-1", "m-2", "m-3", "m-4"}
	e.seed(t, merchants, 4)
	o := statement.Options{Period: hours(0, 100), Page: 2} // m-1 and m-2 on the first page
	done, resume := held(t, e, o)
	ctx := t.Context()
	for _, m := range merchants { // one of the page being read, the others of the next
		if err := e.store.Commit(ctx, []ledger.Row{debit("late-"+m, m, 5)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Grant(ctx, []ledger.Credit{{ID: "g-m-5", MerchantID: "m-5", Amount: 10}}); err != nil {
		t.Fatal(err)
	}
	resume()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	recs := records(t, r.sum.Path)
	if tr := recs[len(recs)-1]; tr["merchants"] != float64(4) || tr["rows"] != float64(4*6) {
		t.Fatalf("trailer %v, want the 4 merchants of the snapshot with their 6 rows each", tr)
	}
	for _, rec := range recs {
		if rec["record"] == "closing" && rec["balance"] != float64(90) {
			t.Fatalf("closing %v, want 90: a payment of the export's time is in it", rec)
		}
	}

	next := statement.Options{Period: ledger.Period{From: o.Period.To, To: time.Now().Add(time.Second)}, Settle: -1}
	time.Sleep(time.Until(next.Period.To))
	sum, err := e.export(context.Background(), e.db.SQL, next)
	if err != nil {
		t.Fatal(err)
	}
	recs = records(t, sum.Path)
	if tr := recs[len(recs)-1]; tr["merchants"] != float64(5) || tr["rows"] != float64(5) {
		t.Fatalf("the next period: trailer %v, want the 5 rows written meanwhile", tr)
	}
}
