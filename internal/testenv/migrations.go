package testenv

import (
	"fmt"
	"io/fs"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/quotaflow/billing/migrations"
)

// NextMigrations is the embedded migrations and one more, version next, with
// the given up and down SQL: the schema of the release after this build's.
func NextMigrations(t testing.TB, up, down string) (_ fs.FS, next uint) {
	t.Helper()
	out := fstest.MapFS{}
	names, _ := fs.Glob(migrations.FS, "*.sql") // the pattern is valid
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		v, _ := strconv.ParseUint(name[:4], 10, 32) // NNNN_: held by the migrate tests
		out[name], next = &fstest.MapFile{Data: b}, max(next, uint(v)+1)
	}
	out[fmt.Sprintf("%04d_next.up.sql", next)] = &fstest.MapFile{Data: []byte(up)}
	out[fmt.Sprintf("%04d_next.down.sql", next)] = &fstest.MapFile{Data: []byte(down)}
	return out, next
}
