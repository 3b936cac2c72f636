package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// Expand/contract: a binary runs on its own schema and on newer ones when
// every migration since its own is additive. Each NNNN_name.up.sql opens with
// its marker, "-- compat: additive" (the previous schema's binaries still run
// correctly on it) or "-- compat: breaking: why". An older binary does not
// embed the newer files, so Open records each version's verdict in
// compatTable, where the older binary reads it.
const (
	compatTable     = "schema_compat"
	markAdditive    = "-- compat: additive"
	markBreaking    = "-- compat: breaking: "
	createCompatSQL = "CREATE TABLE IF NOT EXISTS `" + compatTable + "` (version BIGINT NOT NULL PRIMARY KEY," +
		" runs_from BIGINT NOT NULL, why VARCHAR(1000) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
)

// marker is one version's verdict: binaries of schema runsFrom..version run
// on it; why is what the breaking migration runsFrom changed.
type marker struct {
	version, runsFrom uint
	why               string
}

// markers reads the marker of every up migration in fsys, in version order.
func markers(fsys fs.FS) ([]marker, error) {
	names, err := fs.Glob(fsys, "*.up.sql")
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("migrate: no embedded migrations (%v)", err)
	}
	var out []marker
	for _, name := range names {
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("migrate: %s: no version number", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		first, _, _ := strings.Cut(string(b), "\n") // the marker, until checked below
		out = append(out, marker{version: uint(v), why: strings.TrimSpace(first)})
	}
	slices.SortFunc(out, func(a, b marker) int { return cmp.Compare(a.version, b.version) })
	for i := range out {
		m := &out[i]
		why, breaking := strings.CutPrefix(m.why, markBreaking)
		switch {
		case breaking && strings.TrimSpace(why) != "":
			m.runsFrom, m.why = m.version, strings.TrimSpace(why)
		case m.why == markAdditive && i > 0:
			m.runsFrom, m.why = out[i-1].runsFrom, out[i-1].why
		case m.why == markAdditive:
			return nil, fmt.Errorf("migrate: migration %d is the first: nothing ran before it, mark it breaking", m.version)
		default:
			return nil, fmt.Errorf("migrate: migration %d opens with no compatibility marker (%q or %q)", m.version, markAdditive, markBreaking+"why")
		}
	}
	return out, nil
}

// recordMarkers writes every marker to compatTable.
func recordMarkers(ctx context.Context, db *sql.DB, ms []marker) error {
	if _, err := db.ExecContext(ctx, createCompatSQL); err != nil {
		return fmt.Errorf("migrate: create %s: %w", compatTable, err)
	}
	q, args := "INSERT INTO `"+compatTable+"` (version, runs_from, why) VALUES ", []any{}
	for i, m := range ms {
		if i > 0 {
			q += ", "
		}
		q += "(?, ?, ?)"
		args = append(args, m.version, m.runsFrom, m.why)
	}
	if _, err := db.ExecContext(ctx, q+" ON DUPLICATE KEY UPDATE runs_from = VALUES(runs_from), why = VALUES(why)", args...); err != nil {
		return fmt.Errorf("migrate: record compatibility markers: %w", err)
	}
	return nil
}
