package load

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotaflow/billing/internal/scenario"
)

// innodbCounters are the server counters a run reports per event: what
// InnoDB read from disk (buffer pool misses) against what it read at all,
// its fsyncs, the dirty pages it wrote back (random keys dirty a page per
// insert) and the redo it wrote (with the redo log's size, how long a dirty
// page may wait, and so how many inserts it gathers per write; on MariaDB
// 10.11 the log's growth equals the LSN's); last its deadlocks, reported per
// 100,000 events. Server-wide: other clients of a shared server count too. A
// counter the server lacks reads as 0.
var innodbCounters = []string{"Innodb_buffer_pool_reads", "Innodb_buffer_pool_read_requests", "Innodb_data_fsyncs", "Innodb_buffer_pool_pages_flushed", "Innodb_os_log_written",
	scenario.InnoDBDeadlocks}

// InnoDB is the server's counters over the window, per event, and the
// ledger's size at the end (InnoDB's estimates, rows included).
type InnoDB struct {
	DiskReadsPerEvent    float64 `json:"buffer_pool_disk_reads_per_event"`
	ReadRequestsPerEvent float64 `json:"buffer_pool_read_requests_per_event"`
	FsyncsPerEvent       float64 `json:"fsyncs_per_event"`
	PagesFlushedPerEvent float64 `json:"pages_flushed_per_event"`
	RedoBytesPerEvent    float64 `json:"redo_bytes_per_event"`
	LedgerRows           int64   `json:"ledger_rows_estimate"`
	LedgerDataBytes      int64   `json:"ledger_data_bytes"`
	LedgerIndexBytes     int64   `json:"ledger_index_bytes"`
	// Deadlocks are the server's in the window: other sessions' count too.
	Deadlocks scenario.Deadlocks `json:"deadlocks"`
}

// innoDB is the counters' growth from before, per event, and the ledger's size.
func innoDB(ctx context.Context, db *sql.DB, before map[string]int64, events int) (InnoDB, error) {
	after, err := scenario.GlobalStatus(ctx, db, innodbCounters...)
	if err != nil {
		return InnoDB{}, err
	}
	per := func(name string) float64 { return float64(after[name]-before[name]) / float64(events) }
	s := InnoDB{DiskReadsPerEvent: per(innodbCounters[0]), ReadRequestsPerEvent: per(innodbCounters[1]), FsyncsPerEvent: per(innodbCounters[2]),
		PagesFlushedPerEvent: per(innodbCounters[3]), RedoBytesPerEvent: per(innodbCounters[4]), Deadlocks: scenario.DeadlocksOver(before, after, events)}
	err = db.QueryRowContext(ctx, "SELECT TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'quota_ledger'").
		Scan(&s.LedgerRows, &s.LedgerDataBytes, &s.LedgerIndexBytes)
	if err != nil {
		return s, fmt.Errorf("load: read the ledger's size: %w", err)
	}
	return s, nil
}

// redoLogBytes is the redo log's capacity, 0 when unknown: MySQL 8.0.30 and
// later size it as innodb_redo_log_capacity; older MySQL (and MariaDB before
// 10.6) as innodb_log_files_in_group files of innodb_log_file_size; MariaDB
// 10.6 and later as one file of innodb_log_file_size. Each is asked apart: a
// server without the variable refuses the query.
func redoLogBytes(ctx context.Context, db *sql.DB) int64 {
	for _, q := range []string{
		"SELECT @@innodb_redo_log_capacity",
		"SELECT @@innodb_log_file_size * @@innodb_log_files_in_group",
		"SELECT @@innodb_log_file_size",
	} {
		var n int64
		if err := db.QueryRowContext(ctx, q).Scan(&n); err == nil && n > 0 {
			return n
		}
	}
	return 0
}
