package main

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/reconcile"
)

func TestParseFlags(t *testing.T) {
	var out bytes.Buffer
	o, err := parseFlags([]string{"--every", "5m", "--dry-run", "--merchant", "m-1", "--merchant", "m-2,m-3",
		"--concurrency", "8", "--grace", "3m", "--repair-ceiling", "50", "--output", "json", "--hydrate-missing=false", "--fail-on-repair"}, &out, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c := o.Config
	if o.Every != 5*time.Minute || o.Output != outputJSON || !c.DryRun || c.Concurrency != 8 || c.Grace != 3*time.Minute ||
		c.RepairCeiling != 50 || !c.SkipHydrate || !o.FailOnRepair || !reflect.DeepEqual(c.Merchants, []string{"m-1", "m-2", "m-3"}) {
		t.Fatalf("options = %+v", o)
	}
	d, err := parseFlags([]string{"--once"}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Every != 0 || d.Output != outputText || d.Config.Grace != reconcile.DefaultGrace || d.Config.RepairCeiling != reconcile.DefaultRepairCeiling ||
		d.Config.SkipHydrate || d.Config.DryRun || d.FailOnRepair {
		t.Fatalf("defaults = %+v", d)
	}
	if _, err := parseFlags([]string{"-h"}, &out, &out); !errors.Is(err, cli.ErrDone) {
		t.Fatalf("-h: %v", err)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--once", "--every", "1m"},
		{"--every", "10ms"},
		{"--output", "yaml"},
		{"--concurrency", "0"},
		{"--grace", "0s"},
		{"--repair-ceiling", "-1"},
		{"--merchant", "m{1}"},
		{"extra"},
		{"--nope"},
	} {
		var out bytes.Buffer
		if _, err := parseFlags(args, &out, &out); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v accepted", args)
		} else if out.Len() == 0 {
			t.Errorf("%v: nothing told to the user", args)
		}
	}
}
