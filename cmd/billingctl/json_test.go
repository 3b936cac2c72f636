package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// Every command's --output json is one JSON document whose keys are all
// snake_case (quota show once printed Go field names).
func TestJSONKeysAreSnakeCase(t *testing.T) {
	dlqEnv(t)
	db, r := testenv.NewMySQL(t), testenv.NewRedis(t)
	t.Setenv("MYSQL_DSN", db.DSN)
	t.Setenv("REDIS_ADDR", r.Addr)
	t.Setenv("REDIS_KEY_PREFIX", r.Keys.Prefix())
	t.Setenv("DLQ_STATE_DIR", t.TempDir())
	for _, args := range [][]string{
		{"migrate", "--status"},
		{"quota", "grant", "--merchant", "m-1", "--amount", "5", "--id", "g-1"},
		{"quota", "show", "--merchant", "m-1"},
		{"dlq", "ls", "--list"},
		{"dlq", "replay", "--dry-run"},
		{"dlq", "replay", "--error-class", "exhausted"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out, errOut bytes.Buffer
		code := run(ctx, append(args, "--output", "json"), &out, &errOut, os.Getenv)
		cancel()
		var doc any
		if err := json.Unmarshal(out.Bytes(), &doc); code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v\nstdout: %s\nstderr: %s", args, code, err, out.String(), errOut.String())
		}
		for _, k := range keys(doc, nil) {
			if !snake.MatchString(k) {
				t.Errorf("%v: key %q is not snake_case", args, k)
			}
		}
	}
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// keys lists every object key in a decoded JSON document, map keys of
// counts by value (by_class, by_merchant...) excepted: those are data.
func keys(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, k)
			if len(k) > 3 && k[:3] == "by_" {
				continue
			}
			out = keys(x, out)
		}
	case []any:
		for _, x := range v {
			out = keys(x, out)
		}
	}
	return out
}
