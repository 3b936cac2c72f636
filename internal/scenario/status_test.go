package scenario

import (
	"context"
	"database/sql"
	"testing"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/testenv"
)

// A deadlock made on purpose shows in the server's Innodb_deadlocks (other
// sessions' may too: at least one).
func TestDeadlocksOverCountsTheServers(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	ctx := context.Background()
	if _, err := db.SQL.ExecContext(ctx, "CREATE TABLE pair (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.ExecContext(ctx, "INSERT INTO pair VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	before, err := GlobalStatus(ctx, db.SQL, InnoDBDeadlocks)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before[InnoDBDeadlocks]; !ok {
		t.Fatalf("the server has no %s: %v", InnoDBDeadlocks, before)
	}
	// Each holds one row, then asks for the other's: whichever asks second
	// closes the cycle and is rolled back.
	var txs []*sql.Tx
	for _, id := range []int{1, 2} {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "UPDATE pair SET v = v + 1 WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
	}
	errs := make(chan error, len(txs))
	for i, tx := range txs {
		go func() {
			_, err := tx.ExecContext(ctx, "UPDATE pair SET v = v + 1 WHERE id = ?", 2-i)
			if err == nil {
				err = tx.Commit()
			}
			errs <- err
		}()
	}
	deadlocked := 0
	for range 2 {
		if err := <-errs; failure.MySQLNumber(err) == failure.MySQLDeadlock {
			deadlocked++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if deadlocked != 1 {
		t.Fatalf("%d of the two transactions deadlocked, want one", deadlocked)
	}
	after, err := GlobalStatus(ctx, db.SQL, InnoDBDeadlocks)
	if err != nil {
		t.Fatal(err)
	}
	d := DeadlocksOver(before, after, 50_000)
	if d.Server < 1 || d.Per100k != 2*float64(d.Server) {
		t.Fatalf("%+v over 50,000 events after a deadlock, want at least 1 and twice that per 100,000", d)
	}
}
