package config

import (
	"bytes"
	"os"
	"testing"
)

// docs/configuration.md is what the generator writes from the table.
func TestReferenceIsGenerated(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/configuration.md differs from the table of variables: run go generate ./internal/config")
	}
}
