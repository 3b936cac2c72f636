// Package migrations embeds the versioned schema (golang-migrate file naming:
// NNNN_name.up.sql / NNNN_name.down.sql) so every binary carries it.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
