// Package schemas embeds the JSON Schemas of every topic's messages, so tests
// hold the decoders and the producers against the documented contract.
package schemas

import (
	"bytes"
	"embed"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema files, one per topic.
const (
	PaymentSucceeded  = "payment-succeeded.schema.json"   // payment.succeeded (KAFKA_TOPIC)
	QuotaGrants       = "quota-grants.schema.json"        // quota.grants (KAFKA_GRANTS_TOPIC)
	PaymentRefunded   = "payment-refunded.schema.json"    // payment.refunded (KAFKA_REFUNDS_TOPIC)
	QuotaEvents       = "quota-events.schema.json"        // quota.events (QUOTA_EVENTS_TOPIC)
	DeadLetterHeaders = "dead-letter-headers.schema.json" // payment.succeeded.dlq (KAFKA_DLQ_TOPIC): the headers
)

// base is where the schemas are published: each one's $id is base + its file.
const base = "https://github.com/quotaflow/billing/schemas/"

//go:embed *.schema.json
var files embed.FS

// Files lists the schema files.
func Files() []string {
	entries, _ := files.ReadDir(".") // embedded: cannot fail
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out
}

// Schema is one compiled schema.
type Schema struct{ s *jsonschema.Schema }

// Compile compiles the schema of file, asserting formats (date-time).
func Compile(file string) (*Schema, error) {
	b, err := files.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("schemas: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", file, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := base + file // the schema's $id
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", file, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", file, err)
	}
	return &Schema{s}, nil
}

// MustCompile is Compile for the files of this package, which compile (a
// test holds it): it panics on an error, as regexp.MustCompile does.
func MustCompile(file string) *Schema {
	s, err := Compile(file)
	if err != nil {
		panic(err)
	}
	return s
}

// Validate holds one JSON document against the schema: a value that is not
// exactly one JSON document breaks every schema.
func (s *Schema) Validate(value []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("schemas: not one JSON document: %w", err)
	}
	return s.s.Validate(doc)
}
