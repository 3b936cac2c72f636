package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/scenario"
)

// DefaultAdminDSN is the server the bench creates its databases on.
const DefaultAdminDSN = "root@tcp(127.0.0.1:3306)/?parseTime=true"

// AdminDSN picks the server DSN: explicit (a flag) if set, else
// BILLING_BENCH_MYSQL_DSN, else the server of MYSQL_DSN, else
// DefaultAdminDSN. The database name is dropped and parseTime forced.
func AdminDSN(explicit string, getenv func(string) string) (string, error) {
	dsn := explicit
	for _, v := range []string{"BILLING_BENCH_MYSQL_DSN", "MYSQL_DSN"} {
		if dsn == "" {
			dsn = getenv(v)
		}
	}
	if dsn == "" {
		dsn = DefaultAdminDSN
	}
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

// database is one strategy's fresh, migrated database.
type database struct {
	db   *sql.DB
	gorm *gorm.DB
}

// openDatabase creates and migrates name and opens a pool of poolSize
// connections with client-side placeholder interpolation (one round trip per
// statement instead of prepare, execute and close).
func openDatabase(ctx context.Context, admin *sql.DB, adminDSN, name string, poolSize int) (*database, error) {
	dsn, err := scenario.CreateDatabase(ctx, admin, adminDSN, name)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: MySQL DSN: %w", err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("bench: open %s: %w", name, err)
	}
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	db.SetConnMaxLifetime(10 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: connect %s: %w", name, err)
	}
	g, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: db}), &gorm.Config{
		Logger: logger.Discard, SkipDefaultTransaction: true,
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: gorm on %s: %w", name, err)
	}
	return &database{db: db, gorm: g}, nil
}

const grantChunk = 500

// grant gives every merchant a balance row credited with quota and the
// matching credit ledger row, as billingctl quota grant would.
func grant(ctx context.Context, db *gorm.DB, ids ledgerdb.IDSource, merchants []string, quota int64, at time.Time) error {
	balances := make([]ledger.Balance, len(merchants))
	rows := make([]ledger.Row, len(merchants))
	first := int64(1)
	for i, m := range merchants {
		balances[i] = ledger.Balance{MerchantID: m, Credited: quota, Seq: first, LowBase: quota}
		rows[i] = ledger.Row{EventID: "grant-" + m, MerchantID: m, Kind: ledger.KindCredit, Amount: quota,
			BalanceAfter: &quota, Reason: ledger.ReasonGrant, Seq: &first, OccurredAt: at}
	}
	db = db.WithContext(ctx)
	if err := db.CreateInBatches(balances, grantChunk).Error; err != nil {
		return fmt.Errorf("bench: grant quota: %w", err)
	}
	rowIDs := make([]int64, len(rows))
	if err := ids.NextIDs(rowIDs); err != nil {
		return fmt.Errorf("bench: grant quota: %w", err)
	}
	for i := range rows {
		rows[i].ID = rowIDs[i]
	}
	if err := db.CreateInBatches(rows, grantChunk).Error; err != nil {
		return fmt.Errorf("bench: grant quota: %w", err)
	}
	return nil
}
