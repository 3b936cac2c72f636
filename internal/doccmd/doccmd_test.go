package doccmd

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := "intro `billingctl dlq ls --error-class conflict` and `billing-worker` alone\n" +
		"```sh\n" +
		"$ go run -C tools ./cmd/billing-sim demo --events 100   # the demo\n" +
		"bin/billing-sim load \\\n  --workers 2\n" +
		"go test ./...\n" +
		"go run ./cmd/reconciler --once\n" +
		"```\n" +
		"```\n" +
		"reconciler   corrupted 5 by hand (sample output)\n" +
		"```\n" +
		"description: \"Run `billingctl dlq replay --error-class {{ $labels.class }}`.\"\n" +
		"| `billing-sim demo --events 100000 --merchants 1000 --no-restart` | x |\n"
	got := Parse("doc.md", text)
	want := []string{
		"doc.md:1: billingctl dlq ls --error-class conflict",
		"doc.md:3: go run -C tools ./cmd/billing-sim demo --events 100",
		"doc.md:4: bin/billing-sim load    --workers 2",
		"doc.md:7: go run ./cmd/reconciler --once",
		"doc.md:12: billingctl dlq replay --error-class conflict",
		"doc.md:13: billing-sim demo --events 100000 --merchants 1000 --no-restart",
	}
	var texts []string
	for _, c := range got {
		texts = append(texts, c.String())
	}
	if !slices.Equal(texts, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	if c := got[1]; c.Program != "billing-sim" || !slices.Equal(c.Args, []string{"demo", "--events", "100"}) {
		t.Fatalf("%+v", c)
	}
	if c := got[2]; !slices.Equal(c.Args, []string{"load", "--workers", "2"}) {
		t.Fatalf("%+v", c)
	}
	if c := got[3]; c.Program != "reconciler" || !slices.Equal(c.Args, []string{"--once"}) {
		t.Fatalf("%+v", c)
	}
}

// The repository's documentation quotes commands, among them the one the
// conflict alert gives.
func TestFindInRepository(t *testing.T) {
	cmds, err := Find("../..")
	if err != nil {
		t.Fatal(err)
	}
	var alert bool
	for _, c := range cmds {
		alert = alert || (strings.HasPrefix(c.Source, "deployments/helm/billing/files/alerts.yml") && c.Text == "billingctl dlq ls --error-class conflict")
	}
	if len(For(cmds, "billingctl")) == 0 || len(For(cmds, "reconciler")) == 0 || len(For(cmds, "billing-sim")) == 0 || !alert {
		t.Fatalf("commands found: %v", cmds)
	}
}
