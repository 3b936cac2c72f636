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
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/migrate"
)

// MySQL is a test's own database, migrated to the latest schema.
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
	db := NewEmptyMySQL(t)
	m, err := migrate.Open(db.DSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer m.Close()
	if _, err := m.Up(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return db
}

// NewEmptyMySQL creates a fresh, unmigrated database for t and drops it when the test ends.
func NewEmptyMySQL(t testing.TB) *MySQL {
	t.Helper()
	mysqlOnce.Do(func() { mysqlAdmin, mysqlErr = findMySQL() })
	if mysqlErr != nil {
		unavailable(t, "MySQL", mysqlErr)
	}
	name := UniqueName(t, "billing")
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	admin, err := sql.Open("mysql", mysqlAdmin.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		admin.Close()
		t.Fatalf("testenv: create database: %v", err)
	}
	cfg := mysqlAdmin.Clone()
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	gdb, sqlDB := openGorm(t, name, dsn, 32)
	t.Cleanup(func() {
		sqlDB.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	return &MySQL{Name: name, DSN: dsn, DB: gdb, SQL: sqlDB}
}

// openGorm opens database name at dsn through GORM, with at most maxOpen
// connections; closing them is the caller's.
func openGorm(t testing.TB, name, dsn string, maxOpen int) (*gorm.DB, *sql.DB) {
	t.Helper()
	gdb, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("testenv: open %s: %v", name, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	return gdb, sqlDB
}

func findMySQL() (*mysql.Config, error) {
	dsn := envOr("BILLING_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/?parseTime=true")
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("BILLING_TEST_MYSQL_DSN: %w", err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	err = pingMySQL(cfg)
	if err == nil {
		return cfg, nil
	}
	ccfg, cerr := mysqlContainer()
	if cerr == nil {
		return ccfg, nil
	}
	return nil, errors.Join(err, cerr)
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

func mysqlContainer() (*mysql.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcmysql.Run(ctx, "mysql:8.0", tcmysql.WithPassword("test"), tcmysql.WithUsername("root"))
	if err != nil {
		return nil, err
	}
	dsn, err := c.ConnectionString(ctx, "parseTime=true")
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	return cfg, nil
}
