package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/scenario"
)

// stage is the run's scenario.Stage and a pool on its database (fill, polls, checks).
type stage struct {
	*scenario.Stage
	db *sql.DB
}

func newStage(ctx context.Context, o Options) (*stage, error) {
	s, err := scenario.NewStage(ctx, scenario.StageOptions{Name: "load", MySQLDSN: o.MySQLDSN, Redis: o.Redis,
		KeyPrefix: o.KeyPrefix, Brokers: o.Brokers, Partitions: o.Partitions})
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	cfg, err := mysql.ParseDSN(s.DSN)
	if err != nil {
		return nil, errors.Join(err, s.Teardown())
	}
	cfg.InterpolateParams = true // polls and checks: one round trip each
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("load: open %s: %w", s.DBName, err), s.Teardown())
	}
	db.SetMaxOpenConns(4)
	return &stage{Stage: s, db: db}, nil
}

func (s *stage) teardown() error {
	s.db.Close()
	return s.Teardown()
}
