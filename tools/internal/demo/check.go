package demo

import (
	"context"
	"fmt"
	"sort"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/ledger"
)

// check reads the final state and proves the invariants.
func (r *run) check(ctx context.Context) error {
	db, err := gorm.Open(mysql.Open(r.st.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	client, err := dlq.NewClient(dlq.Broker{Addrs: r.st.Brokers, Transport: r.st.Transport})
	if err != nil {
		return err
	}
	records, err := client.Records(ctx, r.st.DLQTopic)
	if err != nil {
		return fmt.Errorf("demo: read the DLQ: %w", err)
	}
	r.sum.DLQ = map[dlq.Class]int{}
	seen := map[string]bool{}
	for _, rec := range records {
		if !seen[rec.Provenance()] { // copies of one dead-lettering count once
			seen[rec.Provenance()] = true
			r.sum.DLQ[rec.Class]++
		}
	}
	if _, err := r.checkRefunds(ctx, db, records); err != nil {
		return err
	}
	produced := r.traffic.Produced
	produced.Invalid += r.sum.Refunds.DeadLettered
	r.sum.Invariants, err = invariant.Check(ctx, produced, invariant.State{
		DB: db, Redis: r.st.Redis, Keys: r.keys, DLQ: records, RedisSettled: true,
	})
	if err != nil {
		return err
	}
	if err := r.events(ctx, db, client); err != nil {
		return err
	}
	return r.outcomes(ctx, db)
}

// outcomes counts ledger rows by outcome and measures produce-to-commit latency.
func (r *run) outcomes(ctx context.Context, db *gorm.DB) error {
	var rows []struct {
		Kind   ledger.Kind
		Reason string
		N      int64
	}
	if err := db.WithContext(ctx).Raw("SELECT kind, reason, COUNT(*) AS n FROM quota_ledger GROUP BY kind, reason").Scan(&rows).Error; err != nil {
		return err
	}
	r.sum.Outcomes = map[string]int64{}
	for _, row := range rows {
		switch row.Kind {
		case ledger.KindDebit:
			r.sum.Outcomes["applied"] += row.N
		case ledger.KindRejected:
			r.sum.Outcomes[row.Reason] += row.N
		}
	}
	r.sum.Outcomes["duplicate (no effect)"] = int64(len(r.traffic.Produced.Valid) - r.sum.Invariants.Checked["valid unique events"])
	var lat []float64
	if err := db.WithContext(ctx).Raw("SELECT TIMESTAMPDIFF(MICROSECOND, occurred_at, created_at) / 1000.0 FROM quota_ledger WHERE kind <> 'credit'").Scan(&lat).Error; err != nil {
		return err
	}
	sort.Float64s(lat)
	if n := len(lat); n > 0 {
		r.sum.LatencyP50, r.sum.LatencyP99, r.sum.LatencyMax = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	return nil
}
