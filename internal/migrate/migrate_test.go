package migrate_test

import (
	"context"
	"errors"
	"strings"
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
	for _, v := range []uint{1, st.Latest - 1, st.Latest} {
		if err := m.Goto(v); err != nil {
			t.Fatal(err)
		}
		if got, err := m.Status(); err != nil || got.Version != v || got.Dirty {
			t.Fatalf("after Goto(%d): %+v %v", v, got, err)
		}
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

// The worker polls the version over its own pool: a database never migrated
// (no version table at all) is at 0, and each answer says what to do.
func TestReadStatusWithoutVersionTable(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	st, err := migrate.ReadStatus(context.Background(), db.SQL)
	if err != nil || st.Version != 0 || st.Dirty || st.Latest == 0 {
		t.Fatalf("ReadStatus of an empty database = %+v, %v", st, err)
	}
	if err := st.Check(); !errors.Is(err, migrate.ErrBehind) {
		t.Fatalf("Check = %v, want ErrBehind", err)
	}
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if st, err := migrate.ReadStatus(context.Background(), db.SQL); err != nil || st.Check() != nil {
		t.Fatalf("after Up: %+v %v, check %v", st, err, st.Check())
	}
}

func TestStatusCheck(t *testing.T) {
	tests := []struct {
		st   migrate.Status
		is   error // nil: current
		text string
	}{
		{migrate.Status{Version: 3, Latest: 3}, nil, ""},
		{migrate.Status{Version: 0, Latest: 3}, migrate.ErrBehind, "schema at version 0, want 3: run billingctl migrate"},
		{migrate.Status{Version: 2, Latest: 3}, migrate.ErrBehind, "schema at version 2, want 3: run billingctl migrate"},
		{migrate.Status{Version: 2, Dirty: true, Latest: 3}, migrate.ErrDirty, "schema at version 2 is half-applied (dirty), want 3: repair it by hand"},
		{migrate.Status{Version: 3, Dirty: true, Latest: 3}, migrate.ErrDirty, "schema at version 3 is half-applied"},
		{migrate.Status{Version: 4, Latest: 3, RunsFrom: 4, Why: "drops x"}, migrate.ErrAhead, "schema at version 4 is newer than this binary's 3 and not compatible with it (migration 4: drops x)"},
		{migrate.Status{Version: 5, Latest: 3, RunsFrom: 4, Why: "drops x"}, migrate.ErrAhead, "schema at version 5 is newer than this binary's 3 and not compatible with it (migration 4: drops x): deploy a build of schema 4 or later, or migrate down to 3"},
		{migrate.Status{Version: 4, Latest: 3, RunsFrom: 3}, nil, ""}, // additive: a rolled-back binary runs
		{migrate.Status{Version: 5, Latest: 3, RunsFrom: 2}, nil, ""},
	}
	for _, tt := range tests {
		err := tt.st.Check()
		if tt.is == nil {
			if err != nil {
				t.Errorf("%+v: Check = %v, want nil", tt.st, err)
			}
			continue
		}
		if !errors.Is(err, tt.is) || !strings.HasPrefix(err.Error(), tt.text) {
			t.Errorf("%+v: Check = %v, want %v starting %q", tt.st, err, tt.is, tt.text)
		}
		for _, other := range []error{migrate.ErrBehind, migrate.ErrAhead, migrate.ErrDirty} {
			if other != tt.is && errors.Is(err, other) {
				t.Errorf("%+v: Check is %v too", tt.st, other)
			}
		}
	}
}
