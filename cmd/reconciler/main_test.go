package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/quotaflow/billing/internal/reconcile"
)

// The command-line convention: help and version on stdout with exit 0, a bad
// flag or environment on stderr with exit 2, before anything is dialled.
func TestCommandLine(t *testing.T) {
	cases := []struct {
		name           string
		args           []string
		env            map[string]string
		code           int
		stdout, stderr string
	}{
		{"help", []string{"--help"}, nil, 0, "Exit code of a single run", ""},
		{"version", []string{"--version"}, nil, 0, "reconciler version ", ""},
		{"bad flag", []string{"--nope"}, nil, 2, "", "flag provided but not defined: -nope"},
		{"bad value", []string{"--every", "10ms"}, nil, 2, "", "--every 10ms is below 1s"},
		{"bad environment", []string{"--once"}, map[string]string{"LOCK_TTL": "soon"}, 2, "", "LOCK_TTL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, &stdout, &stderr, func(k string) string { return c.env[k] })
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) ||
				(c.stdout == "" && stdout.Len() > 0) || (c.stderr == "" && stderr.Len() > 0) {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout.String(), stderr.String())
			}
			if strings.Count(stdout.String(), "Exit code of a single run") > 1 {
				t.Fatal("usage printed twice")
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		status       reconcile.Status
		failOnRepair bool
		code         int
	}{
		{reconcile.StatusClean, false, 0},
		{reconcile.StatusClean, true, 0},
		{reconcile.StatusRepaired, false, 0},
		{reconcile.StatusRepaired, true, 4},
		{reconcile.StatusDrift, false, 1},
		{reconcile.StatusFailed, true, 3},
	}
	for _, c := range cases {
		if got := exitCode(&reconcile.Report{Status: c.status}, c.failOnRepair); got != c.code {
			t.Errorf("%s fail-on-repair=%v: exit %d, want %d", c.status, c.failOnRepair, got, c.code)
		}
	}
	if exitCode(nil, true) != 0 {
		t.Error("a loop that stopped should exit 0")
	}
}
