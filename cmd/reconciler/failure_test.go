package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Whatever stops the reconciler (its environment, a database it cannot
// reach), its last line is the one JSON shape every program ends with.
func TestFailureIsOneJSONLine(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		code int
	}{
		{"bad environment", map[string]string{"LOCK_TTL": "soon"}, 2},
		{"MySQL unreachable", map[string]string{"MYSQL_DSN": "u@tcp(127.0.0.1:1)/billing?parseTime=true&timeout=1s", "REDIS_ADDR": "127.0.0.1:1"}, exitFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.env["LOG_FORMAT"] = "json"
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"--once"}, &stdout, &stderr, func(k string) string { return c.env[k] })
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			var last struct{ Level, Msg, Program, Error string }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
				t.Fatalf("last line is not JSON: %v\n%s", err, stderr.String())
			}
			if last.Level != "error" || last.Msg != "stopped on an error" || last.Program != "reconciler" || last.Error == "" {
				t.Errorf("last line %+v", last)
			}
			if strings.Contains(stderr.String(), "stacktrace") {
				t.Errorf("a stack trace:\n%s", stderr.String())
			}
		})
	}
}
