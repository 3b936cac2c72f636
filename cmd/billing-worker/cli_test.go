package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built binary: --help and --version on stdout with exit 0, a bad flag
// and a bad environment on stderr with exit 2, before anything is dialled.
func TestCommandLine(t *testing.T) {
	cases := []struct {
		name           string
		args, env      []string
		code           int
		stdout, stderr string
	}{
		{"help", []string{"--help"}, nil, 0, "billing-worker: consume payment.succeeded", ""},
		{"version", []string{"--version"}, nil, 0, "billing-worker version ", ""},
		{"bad flag", []string{"--nope"}, nil, 2, "", "flag provided but not defined: -nope"},
		{"stray argument", []string{"run"}, nil, 2, "", `unexpected argument "run"`},
		{"bad environment", nil, []string{"LOCK_TTL=soon", "KAFKA_BROKERS=127.0.0.1:1", "IDGEN_WORKER_ID=1", "LOG_FORMAT=json"}, 2, "", "LOCK_TTL"},
		{"read API without a token file", nil, []string{"ADMIN_ADDR=127.0.0.1:0", "KAFKA_BROKERS=127.0.0.1:1", "IDGEN_WORKER_ID=1"}, 2, "", "ADMIN_TOKEN_FILE"},
		{"bad read API address", nil, []string{"ADMIN_ADDR=9200", "ADMIN_TOKEN_FILE=/dev/null", "KAFKA_BROKERS=127.0.0.1:1", "IDGEN_WORKER_ID=1"}, 2, "", "ADMIN_ADDR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, c.args...)
			cmd.Env = append([]string{}, c.env...) // nothing inherited: only what the case sets
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) ||
				(c.stdout == "" && stdout.Len() > 0) || (c.stderr == "" && stderr.Len() > 0) {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout.String(), stderr.String())
			}
			if strings.Count(stdout.String(), "Exit codes:") > 1 {
				t.Fatal("usage printed twice")
			}
		})
	}
}

// Version, commit and date set at link time are what --version prints.
func TestVersionFromLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "billing-worker")
	const pkg = "github.com/quotaflow/billing/internal/buildinfo"
	ldflags := "-X " + pkg + ".Version=v9.9.9-test -X " + pkg + ".Commit=abc123 -X " + pkg + ".Date=2026-12-01T00:00:00Z"
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if want := "billing-worker version v9.9.9-test, commit abc123, built 2026-12-01T00:00:00Z, go"; err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("--version = %q, %v; want %q...", out, err, want)
	}
}
