package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSecret(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestSecretFiles(t *testing.T) {
	pw := writeSecret(t, "s3cret\n")
	dsn := writeSecret(t, "u:fromfile@tcp(db:3306)/billing?parseTime=true\n")
	tests := []struct {
		name  string
		env   map[string]string
		check func(c Config) string // "" when right, else what is wrong
	}{
		{"redis", map[string]string{"REDIS_PASSWORD_FILE": pw}, func(c Config) string {
			return cmpStr(c.Redis.Password, "s3cret")
		}},
		{"kafka sasl", map[string]string{"KAFKA_SASL_MECHANISM": "plain", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD_FILE": pw}, func(c Config) string {
			return cmpStr(c.Kafka.SASL.Password, "s3cret")
		}},
		{"mysql password into the dsn", map[string]string{"MYSQL_DSN": "u@tcp(db:3306)/billing?parseTime=true", "MYSQL_PASSWORD_FILE": pw}, func(c Config) string {
			return cmpStr(c.MySQL.DSN, "u:s3cret@tcp(db:3306)/billing?parseTime=true")
		}},
		{"whole dsn", map[string]string{"MYSQL_DSN_FILE": dsn}, func(c Config) string {
			return cmpStr(c.MySQL.DSN, "u:fromfile@tcp(db:3306)/billing?parseTime=true")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func cmpStr(got, want string) string {
	if got != want {
		return "got " + got + ", want " + want
	}
	return ""
}

func TestSecretFileProblems(t *testing.T) {
	pw := writeSecret(t, "hunter2")
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"both forms", map[string]string{"REDIS_PASSWORD": "hunter2", "REDIS_PASSWORD_FILE": pw}, "REDIS_PASSWORD_FILE"},
		{"missing file", map[string]string{"KAFKA_SASL_PASSWORD_FILE": "/nonexistent/pw"}, "cannot be read"},
		{"dsn has a password", map[string]string{"MYSQL_DSN": "u:hunter2@tcp(db:3306)/billing?parseTime=true", "MYSQL_PASSWORD_FILE": pw}, "keep one"},
		{"bad log format", map[string]string{"LOG_FORMAT": "xml"}, `LOG_FORMAT="xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to name %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}
