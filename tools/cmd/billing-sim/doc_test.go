package main

import (
	"bytes"
	"testing"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/doccmd"
)

// Every billing-sim command the documentation quotes parses: its flags and
// values are accepted. They are not run here: demo, bench and load are
// measurements of minutes that would compete with the other tests for the CPU
// (the demo runs end to end, small, in internal/demo).
func TestDocumentedCommandsParse(t *testing.T) {
	cmds, err := doccmd.Find("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka.Brokers = []string{"127.0.0.1:9092"} // produce needs brokers from somewhere
	parsers := map[string]func([]string, deps) error{
		"produce": func(a []string, d deps) error { _, err := parseProduceFlags(a, d); return err },
		"bench":   func(a []string, d deps) error { _, err := parseBenchFlags(a, d); return err },
		"load":    func(a []string, d deps) error { _, err := parseLoadFlags(a, d); return err },
		"demo":    func(a []string, d deps) error { _, _, err := parseDemoFlags(a, d); return err },
	}
	found := doccmd.For(cmds, "billing-sim")
	if len(found) == 0 {
		t.Fatal("no billing-sim command in the documentation")
	}
	for _, c := range found {
		var out bytes.Buffer
		d := deps{cfg: cfg, getenv: func(string) string { return "" }, stdout: &out, stderr: &out}
		parse, ok := parsers[c.Args[0]]
		if !ok {
			t.Errorf("%s: unknown command %q", c, c.Args[0])
			continue
		}
		if err := parse(c.Args[1:], d); err != nil {
			t.Errorf("%s: %v\n%s", c, err, out.String())
		}
	}
}
