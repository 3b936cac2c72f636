package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// Sampling thins repeated info lines; warnings (dead letters, stale caches)
// all reach the log, and with sampling off so does every info line.
func TestSampling(t *testing.T) {
	tests := []struct {
		name      string
		sampling  bool
		level     func(*zap.Logger) func(string, ...zap.Field)
		wantLines int
	}{
		{"info sampled", true, func(l *zap.Logger) func(string, ...zap.Field) { return l.Info }, 100 + 4},
		{"warn never sampled", true, func(l *zap.Logger) func(string, ...zap.Field) { return l.Warn }, 500},
		{"error never sampled", true, func(l *zap.Logger) func(string, ...zap.Field) { return l.Error }, 500},
		{"sampling off", false, func(l *zap.Logger) func(string, ...zap.Field) { return l.Info }, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			log, err := build(Options{Level: "info", Format: FormatJSON, Sampling: tt.sampling}, &b)
			if err != nil {
				t.Fatal(err)
			}
			log = log.With(zap.String("component", "test")) // With keeps the routing
			write := tt.level(log)
			for i := range 500 {
				write("message dead-lettered", zap.Int("i", i))
			}
			if got := len(lines(t, &b)); got != tt.wantLines {
				t.Errorf("%d lines, want %d", got, tt.wantLines)
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	for _, o := range []Options{{Level: "loud"}, {Level: "info", Format: "xml"}} {
		if _, err := build(o, &bytes.Buffer{}); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

type problems []error

func (p problems) Error() string   { return fmt.Sprintf("config: %d problem(s)", len(p)) }
func (p problems) Unwrap() []error { return p }

// Every program's last line has one shape, whatever stopped it.
func TestFailureShape(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantProblems int
	}{
		{"plain error", errors.New("dial: connection refused"), 0},
		{"configuration", fmt.Errorf("start: %w", problems{errors.New(`LOCK_TTL="x" is not a duration`), errors.New("KAFKA_BROKERS is required")}), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			Failure(&b, "billing-worker", FormatJSON, tt.err)
			got := lines(t, &b)
			if len(got) != 1 {
				t.Fatalf("%d lines, want 1: %s", len(got), b.String())
			}
			l := got[0]
			for k, want := range map[string]string{"level": "error", "msg": "stopped on an error", "program": "billing-worker", "error": tt.err.Error()} {
				if l[k] != want {
					t.Errorf("%s = %v, want %q", k, l[k], want)
				}
			}
			if _, ok := l["ts"]; !ok {
				t.Error("no ts")
			}
			if _, ok := l["stacktrace"]; ok {
				t.Error("a stack trace: the error says what failed")
			}
			if p, _ := l["problems"].([]any); len(p) != tt.wantProblems {
				t.Errorf("problems %v, want %d", l["problems"], tt.wantProblems)
			}
		})
	}
	var b bytes.Buffer
	Failure(&b, "billingctl", FormatConsole, errors.New("boom"))
	if b.String() != "billingctl: boom\n" {
		t.Errorf("console failure %q", b.String())
	}
}
