// Command gendoc writes the configuration reference (docs/configuration.md)
// from the table of variables config.Load reads: go generate ./internal/config.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quotaflow/billing/internal/config"
)

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	b, err := config.Reference()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
