package main

import (
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/quotaflow/billing/internal/cli"
)

// cronJob is what this test reads of a CronJob; deployments/ checks the
// whole object against the Kubernetes API types.
type cronJob struct {
	Spec struct {
		JobTemplate struct {
			Spec struct {
				PodFailurePolicy *struct {
					Rules []struct {
						Action      string
						OnExitCodes *struct {
							Operator string
							Values   []int32
						} `yaml:"onExitCodes"`
					}
				} `yaml:"podFailurePolicy"`
				Template struct {
					Spec struct {
						Containers []struct{ Command []string }
					}
				}
			}
		} `yaml:"jobTemplate"`
	}
}

// The CronJob fails a Job at once on exactly the codes that retrying cannot
// change (drift left, bad configuration, a repair under --fail-on-repair),
// retries a failed run, and lets a clean or repaired run succeed.
func TestCronJobFailurePolicyMatchesExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../deployments/k8s/reconciler-cronjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cj cronJob
	if err := yaml.Unmarshal(b, &cj); err != nil {
		t.Fatal(err)
	}
	spec := cj.Spec.JobTemplate.Spec
	if spec.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	var failJob []int32
	for _, r := range spec.PodFailurePolicy.Rules {
		if r.Action == "FailJob" && r.OnExitCodes != nil {
			if r.OnExitCodes.Operator != "In" {
				t.Fatalf("operator %s", r.OnExitCodes.Operator)
			}
			failJob = append(failJob, r.OnExitCodes.Values...)
		}
	}
	slices.Sort(failJob)
	if want := []int32{exitDrift, cli.ExitUsage, exitRepaired}; !slices.Equal(failJob, want) {
		t.Fatalf("FailJob on %v, want %v (never %d: a failed run is retried; never 0)", failJob, want, exitFailed)
	}
	cmd := spec.Template.Spec.Containers[0].Command
	if !slices.Contains(cmd, "--once") || slices.Contains(cmd, "--fail-on-repair") {
		t.Fatalf("command %v: want --once, and routine repairs to succeed", cmd)
	}
	if _, err := parseFlags(cmd[1:], nil, nil); err != nil {
		t.Fatalf("command %v does not parse: %v", cmd, err)
	}
}
