package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/migrate"
)

// MySQL is a test's own database.
type MySQL struct {
	Name string // database name
	DSN  string // DSN of this database (parseTime=true)
	DB   *gorm.DB
	SQL  *sql.DB // the connection pool behind DB
}

var (
	mysqlOnce  sync.Once
	mysqlAdmin *mysql.Config // server DSN without a database
	mysqlErr   error
)

// NewMySQL creates a fresh database for t, migrates it and drops it when the test ends.
func NewMySQL(t testing.TB) *MySQL {
	t.Helper()
	return newDatabase(t, sharedMySQL(t), true)
}

// NewEmptyMySQL creates a fresh, unmigrated database for t and drops it when the test ends.
func NewEmptyMySQL(t testing.TB) *MySQL {
	t.Helper()
	return newDatabase(t, sharedMySQL(t), false)
}

func sharedMySQL(t testing.TB) *mysql.Config {
	t.Helper()
	mysqlOnce.Do(func() { mysqlAdmin, mysqlErr = findMySQL() })
	if mysqlErr != nil {
		unavailable(t, "MySQL", mysqlErr)
	}
	return mysqlAdmin
}

// newDatabase creates a database for t on server, dropped when the test ends.
func newDatabase(t testing.TB, server *mysql.Config, migrated bool) *MySQL {
	t.Helper()
	name := UniqueName(t, "billing")
	admin, err := sql.Open("mysql", server.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { // first: a database half made is dropped too
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := &MySQL{Name: name}
	if db.DSN, err = migrate.CreateDatabase(ctx, admin, server.FormatDSN(), name, migrated); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if db.DB, err = gorm.Open(gormmysql.Open(db.DSN), &gorm.Config{Logger: logger.Discard}); err != nil {
		t.Fatalf("testenv: open %s: %v", name, err)
	}
	if db.SQL, err = db.DB.DB(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	db.SQL.SetMaxOpenConns(32)
	t.Cleanup(func() { db.SQL.Close() })
	return db
}

func findMySQL() (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(envOr("BILLING_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/?parseTime=true"))
	if err != nil {
		return nil, fmt.Errorf("BILLING_TEST_MYSQL_DSN: %w", err)
	}
	cfg.DBName, cfg.ParseTime = "", true
	if err = pingMySQL(cfg); err == nil {
		return cfg, nil
	}
	server, cerr := mysqlContainer()
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return server, nil
}

func pingMySQL(cfg *mysql.Config) error {
	c := cfg.Clone()
	c.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}
