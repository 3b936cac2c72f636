package bench

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/migrate"
)

// DefaultAdminDSN is the server the bench creates its databases on.
const DefaultAdminDSN = "root@tcp(127.0.0.1:3306)/?parseTime=true"

// AdminDSN picks the server DSN: explicit (a flag) if set, else
// BILLING_BENCH_MYSQL_DSN, else the server of MYSQL_DSN, else
// DefaultAdminDSN. The database name is dropped and parseTime forced.
func AdminDSN(explicit string, getenv func(string) string) (string, error) {
	dsn := cmp.Or(explicit, getenv("BILLING_BENCH_MYSQL_DSN"), getenv("MYSQL_DSN"), DefaultAdminDSN)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("bench: MySQL DSN: %w", err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	return cfg.FormatDSN(), nil
}

// databaseName is billing_bench_<strategy>_<run>, at most 64 characters.
func databaseName(strategy, run string) string {
	name := "billing_bench_" + strings.ReplaceAll(strategy, "-", "_") + "_" + run
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// openDatabase creates and migrates name and opens a pool of poolSize
// connections; Close closes the pool.
func openDatabase(ctx context.Context, admin *sql.DB, adminDSN, name string, poolSize int) (*database, error) {
	dsn, err := migrate.CreateDatabase(ctx, admin, adminDSN, name, true)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: open %s: %w", name, err)
	}
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	g, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: gorm on %s: %w", name, err)
	}
	return &database{DB: g, pool: db}, nil
}

type database struct {
	*gorm.DB
	pool *sql.DB
}

func (d *database) Close() error { return d.pool.Close() }

// grant credits every merchant with quota, as billingctl quota grant would.
func grant(ctx context.Context, store *ledgerdb.Store, merchants []string, quota int64) error {
	credits := make([]ledger.Credit, len(merchants))
	for i, m := range merchants {
		credits[i] = ledger.Credit{ID: "grant-" + m, MerchantID: m, Amount: quota, Priority: ledger.DefaultPriority}
	}
	out, err := store.Grant(ctx, credits)
	if err != nil {
		return fmt.Errorf("bench: grant quota: %w", err)
	}
	for _, c := range out {
		if c.Err != nil {
			return fmt.Errorf("bench: grant quota: %w", c.Err)
		}
	}
	return nil
}
