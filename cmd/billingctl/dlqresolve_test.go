package main

import (
	"errors"
	"strings"
	"testing"
)

// dlq resolve takes what its filter selects out of ls and replay; it wants a
// filter, and a dry run marks nothing.
func TestDLQResolve(t *testing.T) {
	dlqEnv(t)
	if _, _, err := runCmd(t, "dlq", "resolve"); !errors.Is(err, exitError(2)) {
		t.Fatalf("resolve without a filter: %v, want exit 2", err)
	}
	out, errs, err := runCmd(t, "dlq", "resolve", "--merchant", "m-1", "--dry-run")
	if err != nil || !strings.Contains(out, "dry run: would resolve 2 message(s)") {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, errs)
	}
	out, errs, err = runCmd(t, "dlq", "resolve", "--merchant", "m-1", "--note", "refunded by hand")
	if err != nil || !strings.Contains(out, "resolved 2 message(s)") || !strings.Contains(out, "event_id=e-3") {
		t.Fatalf("resolve: %v\n%s\n%s", err, out, errs)
	}
	out, _, err = runCmd(t, "dlq", "ls")
	if err != nil || !strings.Contains(out, "2 message(s)") || !strings.Contains(out, "2 more resolved") {
		t.Errorf("ls after resolve: %v\n%s", err, out)
	}
	out, errs, err = runCmd(t, "dlq", "replay", "--dry-run")
	if err != nil || !strings.Contains(out, "would send 1 message(s)") || !strings.Contains(out, "2 resolved skipped") {
		t.Errorf("replay after resolve: %v\n%s\n%s", err, out, errs)
	}
}
