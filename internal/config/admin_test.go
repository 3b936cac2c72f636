package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdmin(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		want     Admin
		problems []string // variables named, in order; none: valid
	}{
		{"off by default", nil, Admin{Rate: 10, Burst: 20}, nil},
		{"on", map[string]string{"ADMIN_ADDR": "127.0.0.1:9200", "ADMIN_TOKEN_FILE": token, "ADMIN_RATE_LIMIT": "2.5"},
			Admin{Addr: "127.0.0.1:9200", TokenFile: token, Rate: 2.5, Burst: 3}, nil},
		{"rate and burst", map[string]string{"ADMIN_RATE_LIMIT": "50, 5"}, Admin{Rate: 50, Burst: 5}, nil},
		{"bad addr", map[string]string{"ADMIN_ADDR": "9200", "ADMIN_TOKEN_FILE": token}, Admin{}, []string{"ADMIN_ADDR"}},
		{"addr without token file", map[string]string{"ADMIN_ADDR": ":9200"}, Admin{}, []string{"ADMIN_TOKEN_FILE"}},
		{"missing token file", map[string]string{"ADMIN_ADDR": ":9200", "ADMIN_TOKEN_FILE": filepath.Join(dir, "nope")}, Admin{}, []string{"ADMIN_TOKEN_FILE"}},
		{"short token", map[string]string{"ADMIN_ADDR": ":9200", "ADMIN_TOKEN_FILE": short}, Admin{}, []string{"ADMIN_TOKEN_FILE"}},
		{"bad rate", map[string]string{"ADMIN_RATE_LIMIT": "fast"}, Admin{}, []string{"ADMIN_RATE_LIMIT"}},
		{"zero rate", map[string]string{"ADMIN_RATE_LIMIT": "0,5"}, Admin{}, []string{"ADMIN_RATE_LIMIT"}},
		{"bad burst", map[string]string{"ADMIN_RATE_LIMIT": "5,0"}, Admin{}, []string{"ADMIN_RATE_LIMIT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env))
			if len(tt.problems) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.Admin != tt.want {
					t.Fatalf("admin %+v, want %+v", c.Admin, tt.want)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != len(tt.problems) {
				t.Fatalf("err %v, want problems with %v", err, tt.problems)
			}
			for i, v := range tt.problems {
				if !strings.HasPrefix(ce.Problems[i].Error(), v) {
					t.Errorf("problem %d = %q, want it to name %s", i, ce.Problems[i], v)
				}
			}
		})
	}
}
