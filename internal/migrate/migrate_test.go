package migrate_test

import (
	"errors"
	"testing"

	"github.com/quotaflow/billing/internal/migrate"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestUpTwiceIsNoOp(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	changed, err := m.Up()
	if err != nil || !changed {
		t.Fatalf("first Up = %v, %v", changed, err)
	}
	changed, err = m.Up()
	if err != nil || changed {
		t.Fatalf("second Up = %v, %v; want a no-op", changed, err)
	}
	st, err := m.Status()
	if err != nil || st.Dirty || st.Version != st.Latest || st.Latest == 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	for _, table := range []string{"merchant_balance", "quota_ledger", "reconcile_runs", "reconcile_findings", "reconcile_checkpoints"} {
		var n int
		if err := db.DB.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n).Error; err != nil || n != 1 {
			t.Errorf("table %s missing (%d, %v)", table, n, err)
		}
	}
}

func TestDownAndUpAgain(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status()
	if err := m.Down(int(st.Latest)); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(); st.Version != 0 {
		t.Fatalf("after down: %+v", st)
	}
	if changed, err := m.Up(); err != nil || !changed {
		t.Fatalf("up after down = %v, %v", changed, err)
	}
}

// A migration that failed part way leaves the schema dirty: Up must refuse and
// say so, and Force clears it once a person has repaired the schema.
func TestHalfAppliedIsReported(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	// A table in the way makes migration 2 fail after migration 1 succeeded.
	if err := db.DB.Exec("CREATE TABLE quota_ledger (x INT)").Error; err != nil {
		t.Fatal(err)
	}
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(); err == nil {
		t.Fatal("Up succeeded over a conflicting table")
	}
	_, err = m.Up()
	if !errors.Is(err, migrate.ErrDirty) {
		t.Fatalf("second Up = %v, want ErrDirty", err)
	}
	st, _ := m.Status()
	if !st.Dirty || st.Version != 2 {
		t.Fatalf("status %+v, want dirty at 2", st)
	}
	// The operator repairs by hand and forces the version back to the last good one.
	if err := db.DB.Exec("DROP TABLE quota_ledger").Error; err != nil {
		t.Fatal(err)
	}
	if err := m.Force(1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(); err != nil {
		t.Fatalf("Up after repair: %v", err)
	}
}
