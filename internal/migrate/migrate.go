// Package migrate applies the embedded schema with golang-migrate.
//
// golang-migrate records a "dirty" version when a migration fails part way
// (MySQL cannot roll DDL back); Up then refuses to continue and says so, rather
// than guessing what was applied. An operator fixes the schema by hand and
// clears the flag with Force.
package migrate

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	gomigrate "github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/quotaflow/billing/migrations"
)

// ErrDirty reports a half-applied migration.
var ErrDirty = errors.New("migrate: schema is half-applied (dirty)")

// Status is the schema version in the database.
type Status struct {
	Version uint // 0: nothing applied
	Dirty   bool
	Latest  uint // newest version embedded in this binary
}

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	db *sql.DB
	m  *gomigrate.Migrate
}

// Open connects to the database named in dsn (go-sql-driver/mysql format).
func Open(dsn string) (*Migrator, error) {
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
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: read embedded migrations: %w", err)
	}
	m, err := gomigrate.NewWithInstance("iofs", src, cfg.DBName, driver)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Migrator{db: db, m: m}, nil
}

// Close releases the connection.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}

// Status reports the applied and the latest embedded version.
func (g *Migrator) Status() (Status, error) {
	latest, err := latestVersion()
	if err != nil {
		return Status{}, err
	}
	v, dirty, err := g.m.Version()
	if errors.Is(err, gomigrate.ErrNilVersion) {
		return Status{Latest: latest}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("migrate: read version: %w", err)
	}
	return Status{Version: v, Dirty: dirty, Latest: latest}, nil
}

// Up applies every pending migration. It reports whether anything changed; on a
// dirty schema it returns ErrDirty and applies nothing.
func (g *Migrator) Up() (changed bool, err error) {
	st, err := g.Status()
	if err != nil {
		return false, err
	}
	if st.Dirty {
		return false, fmt.Errorf("%w: version %d failed part way; repair the schema by hand, then run `billingctl migrate --force %d`", ErrDirty, st.Version, st.Version)
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

// Force records version as applied and clean, after a person repaired the schema.
func (g *Migrator) Force(version int) error {
	if err := g.m.Force(version); err != nil {
		return fmt.Errorf("migrate: force %d: %w", version, err)
	}
	return nil
}

func latestVersion() (uint, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("migrate: read embedded migrations: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("migrate: no embedded migrations: %w", err)
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil // fs.ErrNotExist: v is the last
		}
		v = next
	}
}
