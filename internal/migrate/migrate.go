// Package migrate applies the embedded schema with golang-migrate. A migration
// that failed part way leaves the schema dirty (MySQL cannot roll DDL back):
// Up refuses it until an operator repairs the schema and calls Force. A binary
// runs on its own schema and on newer ones reached by additive migrations
// only (compat.go), so rolling a binary back needs no migration down.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/go-sql-driver/mysql"
	gomigrate "github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/migrations"
)

// Why a schema is not the one this binary embeds (see Status.Check).
var (
	ErrDirty  = errors.New("migrate: schema is half-applied (dirty)")
	ErrBehind = errors.New("migrate: schema older than this binary")
	ErrAhead  = errors.New("migrate: schema newer than this binary")
)

// Status is the schema version in the database.
type Status struct {
	Version uint // 0: nothing applied
	Dirty   bool
	Latest  uint // newest version embedded in this binary
	// RunsFrom is the oldest binary schema that runs on Version; Why is what
	// migration RunsFrom broke for the binaries before it.
	RunsFrom uint
	Why      string
}

// Check returns nil when this binary runs on the schema (its own, or a newer
// one only additive migrations led to), else a *StatusError saying what is
// wrong and what to do.
func (s Status) Check() error {
	if s.Dirty || s.Version < s.Latest || s.RunsFrom > s.Latest {
		return &StatusError{s}
	}
	return nil
}

// StatusError is a schema a program cannot run on. errors.Is matches
// ErrDirty, ErrBehind or ErrAhead.
type StatusError struct {
	Status
}

func (e *StatusError) Error() string {
	switch {
	case e.Dirty:
		return fmt.Sprintf("schema at version %d is half-applied (dirty), want %d: repair it by hand, mark the version it now is with billingctl migrate --force VERSION, then run billingctl migrate", e.Version, e.Latest)
	case e.Version > e.Latest:
		return fmt.Sprintf("schema at version %d is newer than this binary's %d and not compatible with it (migration %d: %s): "+
			"deploy a build of schema %d or later, or migrate down to %d with the build that migrated it", e.Version, e.Latest, e.RunsFrom, e.Why, e.RunsFrom, e.Latest)
	}
	return fmt.Sprintf("schema at version %d, want %d: run billingctl migrate", e.Version, e.Latest)
}

func (e *StatusError) Is(target error) bool {
	switch {
	case e.Dirty:
		return target == ErrDirty
	case e.Version > e.Latest:
		return target == ErrAhead
	}
	return target == ErrBehind && e.Version < e.Latest
}

// ReadStatus reads the schema version and its compatibility marker, cheap to
// poll; a database never migrated is at version 0.
func ReadStatus(ctx context.Context, db *sql.DB) (Status, error) {
	ms, err := markers(migrations.FS)
	if err != nil {
		return Status{}, err
	}
	return readStatus(ctx, db, ms[len(ms)-1].version)
}

func readStatus(ctx context.Context, db *sql.DB, latest uint) (Status, error) {
	var v int64
	var dirty bool
	err := db.QueryRowContext(ctx, "SELECT version, dirty FROM `"+migratemysql.DefaultMigrationsTable+"` LIMIT 1").Scan(&v, &dirty)
	switch {
	case noRows(err):
		return Status{Latest: latest}, nil
	case err != nil:
		return Status{}, fmt.Errorf("migrate: read version: %w", err)
	case v < 0:
		return Status{Latest: latest}, nil // golang-migrate's "no version"
	}
	st := Status{Version: uint(v), Dirty: dirty, Latest: latest, RunsFrom: uint(v)}
	err = db.QueryRowContext(ctx, "SELECT runs_from, why FROM `"+compatTable+"` WHERE version = ?", v).Scan(&st.RunsFrom, &st.Why)
	switch {
	case noRows(err): // migrated by a build that recorded no markers
		st.RunsFrom, st.Why = st.Version, "no compatibility marker is recorded for it"
	case err != nil:
		return Status{}, fmt.Errorf("migrate: read compatibility: %w", err)
	}
	return st, nil
}

// noRows: the row or its whole table is missing.
func noRows(err error) bool {
	var me *mysql.MySQLError
	return errors.Is(err, sql.ErrNoRows) || errors.As(err, &me) && me.Number == failure.MySQLNoSuchTable
}

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	db     *sql.DB
	m      *gomigrate.Migrate
	latest uint
}

// CreateDatabase creates the database name on the server of admin (whose DSN
// is serverDSN), migrates it when migrated is set, and returns its DSN.
func CreateDatabase(ctx context.Context, admin *sql.DB, serverDSN, name string, migrated bool) (string, error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return "", fmt.Errorf("migrate: MySQL DSN: %w", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", fmt.Errorf("migrate: create database %s on %s: %w", name, cfg.Addr, err)
	}
	cfg.DBName = name
	if !migrated {
		return cfg.FormatDSN(), nil
	}
	m, err := Open(cfg.FormatDSN())
	if err != nil {
		return "", err
	}
	_, err = m.Up()
	return cfg.FormatDSN(), errors.Join(err, m.Close())
}

// Open connects to the database named in dsn (go-sql-driver/mysql format) and
// records the embedded migrations' compatibility markers there.
func Open(dsn string) (*Migrator, error) { return OpenFS(dsn, migrations.FS) }

// OpenFS is Open with the migrations of fsys instead of the embedded ones: a
// newer release's, as a test rolls a binary back onto them.
func OpenFS(dsn string, fsys fs.FS) (*Migrator, error) {
	ms, err := markers(fsys)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("migrate: parse MYSQL_DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("migrate: MYSQL_DSN names no database")
	}
	cfg.MultiStatements = true // a migration file may hold several statements
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("migrate: open: %w", err)
	}
	driver, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	src, err := iofs.New(fsys, ".")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: read migrations: %w", err)
	}
	m, err := gomigrate.NewWithInstance("iofs", src, cfg.DBName, driver)
	if err == nil {
		err = recordMarkers(context.Background(), db, ms)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Migrator{db: db, m: m, latest: ms[len(ms)-1].version}, nil
}

// Close releases the connection.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}

// Status reports the applied and the latest embedded version.
func (g *Migrator) Status() (Status, error) {
	return readStatus(context.Background(), g.db, g.latest)
}

// Up applies every pending migration. It reports whether anything changed; on a
// dirty schema it returns ErrDirty and applies nothing, as it does on a newer
// schema this binary does not run on (one it runs on is up to date).
func (g *Migrator) Up() (changed bool, err error) {
	st, err := g.Status()
	if err != nil {
		return false, err
	}
	switch {
	case st.Dirty:
		return false, fmt.Errorf("%w: version %d failed part way; repair the schema by hand, then run `billingctl migrate --force %d`", ErrDirty, st.Version, st.Version)
	case st.Version > st.Latest:
		return false, st.Check()
	}
	err = g.m.Up()
	if errors.Is(err, gomigrate.ErrNoChange) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrate: up: %w", err)
	}
	return true, nil
}

// Down reverts the newest steps migrations.
func (g *Migrator) Down(steps int) error {
	if steps <= 0 {
		return fmt.Errorf("migrate: down needs a positive step count, got %d", steps)
	}
	if err := g.m.Steps(-steps); err != nil && !errors.Is(err, gomigrate.ErrNoChange) {
		return fmt.Errorf("migrate: down: %w", err)
	}
	return nil
}

// Goto migrates up or down to version, as golang-migrate's `goto`: a rollout
// in stages, or a database held at an older binary's schema.
func (g *Migrator) Goto(version uint) error {
	if err := g.m.Migrate(version); err != nil && !errors.Is(err, gomigrate.ErrNoChange) {
		return fmt.Errorf("migrate: goto %d: %w", version, err)
	}
	return nil
}

// Force records version as applied and clean, after a person repaired the schema.
func (g *Migrator) Force(version int) error {
	if err := g.m.Force(version); err != nil {
		return fmt.Errorf("migrate: force %d: %w", version, err)
	}
	return nil
}
