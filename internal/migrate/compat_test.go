package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/quotaflow/billing/internal/migrate"
	"github.com/quotaflow/billing/internal/testenv"
)

// Every migration opens with its compatibility marker; one without is
// refused before anything is applied, naming it.
func TestEveryMigrationCarriesAMarker(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	for _, tt := range []struct {
		fs   fstest.MapFS
		want string
	}{
		{fstest.MapFS{"0001_a.up.sql": {Data: []byte("CREATE TABLE a (x INT);")}}, "migration 1 opens with no compatibility marker"},
		{fstest.MapFS{"0001_a.up.sql": {Data: []byte("-- compat: additive\nCREATE TABLE a (x INT);")}}, "migration 1 is the first"},
		{fstest.MapFS{"0001_a.up.sql": {Data: []byte("-- compat: breaking: first\n")}, "0002_b.up.sql": {Data: []byte("-- compat: breaking:\n")}},
			"migration 2 opens with no compatibility marker"},
	} {
		m, err := migrate.OpenFS(db.DSN, tt.fs)
		if err == nil {
			m.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("OpenFS = %v, want %q", err, tt.want)
		}
	}
	if st, err := migrate.ReadStatus(context.Background(), db.SQL); err != nil || st.Version != 0 {
		t.Fatalf("after refused markers: %+v %v, want nothing applied", st, err)
	}
}

// 0008 numbers ledger rows (seq) that a release-7 binary would write without:
// it is breaking, and a release-7 binary refuses schema 8 naming why.
func TestCommitOrderIsBreaking(t *testing.T) {
	db := testenv.NewMySQL(t)
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Goto(8); err != nil {
		t.Fatal(err)
	}
	st, err := migrate.ReadStatus(context.Background(), db.SQL)
	if err != nil || st.Version != 8 || st.RunsFrom != 8 || !strings.Contains(st.Why, "without seq") {
		t.Fatalf("status of schema 8: %+v %v, want runs from 8 because of seq", st, err)
	}
	st.Latest = 7
	if err := st.Check(); !errors.Is(err, migrate.ErrAhead) || !strings.Contains(err.Error(), "(migration 8: a release-7 binary writes ledger rows without seq") {
		t.Fatalf("release 7 on schema 8: %v", err)
	}
}

// The release after this one migrates to its schema; this build, rolled back
// onto it, runs when that migration is additive (its own migrate, as an init
// container runs it, is a no-op) and refuses a breaking one naming why, until
// the newer build migrates down.
func TestRollbackOntoTheNextSchema(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		mark string
		want string // "": this build runs on it
	}{
		{"-- compat: additive\n", ""},
		{"-- compat: breaking: renames a column this build writes\n", ": renames a column this build writes)"},
	} {
		db := testenv.NewMySQL(t)
		next, v := testenv.NextMigrations(t, tt.mark+"ALTER TABLE quota_ledger ADD COLUMN note VARCHAR(64) NULL;", "ALTER TABLE quota_ledger DROP COLUMN note;")
		newer, err := migrate.OpenFS(db.DSN, next)
		if err != nil {
			t.Fatal(err)
		}
		defer newer.Close()
		if changed, err := newer.Up(); err != nil || !changed {
			t.Fatalf("newer Up = %v, %v", changed, err)
		}
		st, err := migrate.ReadStatus(ctx, db.SQL)
		if err != nil || st.Version != v || st.Latest != v-1 {
			t.Fatalf("status after the newer migrate: %+v %v", st, err)
		}
		own, err := migrate.Open(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer own.Close()
		changed, upErr := own.Up()
		if tt.want == "" {
			if err := st.Check(); err != nil || changed || upErr != nil {
				t.Fatalf("additive %d: Check %v, own Up = %v, %v; want it to run", v, err, changed, upErr)
			}
			continue
		}
		for _, err := range []error{st.Check(), upErr} {
			if !errors.Is(err, migrate.ErrAhead) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("breaking %d: %v, want ErrAhead naming %q", v, err, tt.want)
			}
		}
		if err := newer.Down(1); err != nil {
			t.Fatal(err)
		}
		if st, err := migrate.ReadStatus(ctx, db.SQL); err != nil || st.Check() != nil {
			t.Fatalf("after the newer build migrated down: %+v %v, check %v", st, err, st.Check())
		}
	}
}
