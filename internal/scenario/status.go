package scenario

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// InnoDBDeadlocks is the server's status counter of the deadlocks InnoDB
// found (and broke, rolling a victim back) since it started: server-wide,
// so other sessions' deadlocks count too.
const InnoDBDeadlocks = "Innodb_deadlocks"

// GlobalStatus reads the server's integer status counters names (SHOW
// GLOBAL STATUS); one the server lacks is missing (reads as 0).
func GlobalStatus(ctx context.Context, db *sql.DB, names ...string) (map[string]int64, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN (?"+strings.Repeat(", ?", len(names)-1)+")", args...)
	if err != nil {
		return nil, fmt.Errorf("scenario: read the server's status: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("scenario: read the server's status: %w", err)
		}
		out[name] = v
	}
	return out, rows.Err()
}

// Deadlocks is the growth of Innodb_deadlocks over a run, and per 100,000 of
// the run's events. Server-wide: another session's deadlock on the same
// server in that time counts too.
type Deadlocks struct {
	Server  int64   `json:"innodb_deadlocks"`
	Per100k float64 `json:"innodb_deadlocks_per_100k_events"`
}

// DeadlocksOver is the deadlocks between two readings of GlobalStatus that
// include InnoDBDeadlocks, over events.
func DeadlocksOver(before, after map[string]int64, events int) Deadlocks {
	d := Deadlocks{Server: after[InnoDBDeadlocks] - before[InnoDBDeadlocks]}
	if events > 0 {
		d.Per100k = float64(d.Server) * 100_000 / float64(events)
	}
	return d
}
