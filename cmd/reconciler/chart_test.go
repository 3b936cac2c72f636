package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/quotaflow/billing/internal/cli"
)

// chartTemplate is the chart's reconciler (deployments/ renders it and checks
// the whole object against the Kubernetes API types; this test holds its
// literal parts against the program's exit codes and flags).
const chartTemplate = "../../deployments/helm/billing/templates/reconciler.yaml"

var (
	// The CronJob's podFailurePolicy, literal in the template.
	failurePolicy = regexp.MustCompile(`(?s)\n( +)podFailurePolicy:\n(.*?)\n {0,6}template:`)
	command       = regexp.MustCompile(`(?m)^ *command: (\[.*\])$`)
	action        = regexp.MustCompile(`\{\{[^}]*\}\}`)
)

// The CronJob fails a Job at once on exactly the codes that retrying cannot
// change (drift left, bad configuration, a repair under --fail-on-repair),
// retries a failed run, and lets a clean or repaired run succeed. Both shapes'
// commands parse.
func TestChartReconcilerMatchesExitCodesAndFlags(t *testing.T) {
	b, err := os.ReadFile(chartTemplate)
	if err != nil {
		t.Fatal(err)
	}
	failJob := failJobCodes(t, b)
	if want := []int32{exitDrift, cli.ExitUsage, exitRepaired}; !slices.Equal(failJob, want) {
		t.Fatalf("FailJob on %v, want %v (never %d: a failed run is retried; never 0)", failJob, want, exitFailed)
	}
	cmds := command.FindAllSubmatch(b, -1)
	if len(cmds) != 2 {
		t.Fatalf("%d commands, want the loop's and the CronJob's", len(cmds))
	}
	for _, c := range cmds {
		var argv []string
		if err := yaml.Unmarshal(action.ReplaceAll(c[1], []byte(`"5m"`)), &argv); err != nil {
			t.Fatalf("%s: %v", c[1], err)
		}
		if slices.Contains(argv, "--fail-on-repair") || !slices.ContainsFunc(argv, func(a string) bool { return a == "--once" || strings.HasPrefix(a, "--every") }) {
			t.Errorf("command %v: want --once or --every, and routine repairs to succeed", argv)
		}
		if _, err := parseFlags(argv[1:], nil, nil); err != nil {
			t.Errorf("command %v does not parse: %v", argv, err)
		}
	}
}

// The statements CronJob fails a Job at once on a statement that does not
// tie out and on a bad environment, retries the rest (a failure, a lost or
// busy job lock), and its command parses with the chart's default values.
func TestChartStatementsMatchExitCodesAndFlags(t *testing.T) {
	b, err := os.ReadFile("../../deployments/helm/billing/templates/statements.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failJobCodes(t, b), []int32{exitTieOut, cli.ExitUsage}; !slices.Equal(got, want) {
		t.Fatalf("FailJob on %v, want %v (never %d, %d or %d: those are retried)", got, want, exitFailed, exitLockLost, exitBusy)
	}
	block := regexp.MustCompile(`(?s)\n( +)command:\n(.*?)\n +envFrom:`).FindSubmatch(b)
	if block == nil {
		t.Fatal("no command")
	}
	values := map[string]string{".Values.statements.previous": "day", ".Values.statements.format": "jsonl", ".Values.statements.wait": "10m"}
	text := action.ReplaceAllFunc(block[2], func(a []byte) []byte {
		for k, v := range values {
			if strings.Contains(string(a), k) {
				return []byte(`"` + v + `"`)
			}
		}
		t.Fatalf("a value the test does not know: %s", a)
		return nil
	})
	var argv []string
	if err := yaml.Unmarshal(text, &argv); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	if len(argv) < 2 || argv[1] != "export" {
		t.Fatalf("command %v: want reconciler export", argv)
	}
	if _, err := parseExportFlags(argv[2:], nil, nil, time.Now()); err != nil {
		t.Errorf("command %v does not parse: %v", argv, err)
	}
}

// failJobCodes are the exit codes a template's podFailurePolicy fails the
// Job on, sorted.
func failJobCodes(t *testing.T, b []byte) []int32 {
	t.Helper()
	m := failurePolicy.FindSubmatch(b)
	if m == nil {
		t.Fatal("no podFailurePolicy")
	}
	var policy struct {
		Rules []struct {
			Action      string
			OnExitCodes *struct {
				Operator string
				Values   []int32
			} `yaml:"onExitCodes"`
		}
	}
	if err := yaml.Unmarshal(m[2], &policy); err != nil {
		t.Fatal(err)
	}
	var failJob []int32
	for _, r := range policy.Rules {
		if r.Action == "FailJob" && r.OnExitCodes != nil {
			if r.OnExitCodes.Operator != "In" {
				t.Fatalf("operator %s", r.OnExitCodes.Operator)
			}
			failJob = append(failJob, r.OnExitCodes.Values...)
		}
	}
	slices.Sort(failJob)
	return failJob
}
