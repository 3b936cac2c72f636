package logging

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

func TestGORM(t *testing.T) {
	tests := []struct {
		name    string
		elapsed time.Duration
		err     error
		wantMsg string // "" for no line
	}{
		{"fast and fine", time.Millisecond, nil, ""},
		{"record not found", time.Millisecond, gorm.ErrRecordNotFound, ""},
		{"failed", time.Millisecond, errors.New("Error 1146 (42S02): Table 'billing.quota_ledger' doesn't exist"), "sql statement failed"},
		{"slow", time.Second, nil, "slow sql statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			log, err := build(Options{Level: "info", Format: FormatJSON}, &b)
			if err != nil {
				t.Fatal(err)
			}
			g := GORM(log, 200*time.Millisecond)
			sql, _ := g.(interface {
				ParamsFilter(context.Context, string, ...any) (string, []any)
			}).ParamsFilter(context.Background(), "SELECT `event_id` FROM `quota_ledger`\nWHERE `event_id` IN (?,?)", "evt-1", "evt-2")
			g.Trace(context.Background(), time.Now().Add(-tt.elapsed), func() (string, int64) { return sql, 2 }, tt.err)
			got := lines(t, &b)
			if tt.wantMsg == "" {
				if len(got) != 0 {
					t.Fatalf("logged %v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d lines, want one: %s", len(got), b.String())
			}
			l := got[0]
			if l["msg"] != tt.wantMsg || l["component"] != "gorm" || l["rows"] != float64(2) || l["elapsed"] == nil {
				t.Errorf("line %v", l)
			}
			if s, _ := l["sql"].(string); !strings.Contains(s, "IN (?,?)") {
				t.Errorf("sql %q: want the statement with placeholders", s)
			}
			if tt.err != nil && l["error"] != tt.err.Error() {
				t.Errorf("error field %v", l["error"])
			}
			if strings.Contains(b.String(), ".go:") || strings.Contains(b.String(), "evt-1") {
				t.Errorf("a source path or a value in the line: %s", b.String())
			}
		})
	}
}
