// Package schemas embeds the JSON Schemas of what the programs publish, so
// tests hold the messages against the documented contract.
package schemas

import _ "embed"

// QuotaEvents is the schema of a message on the balance-events topic.
//
//go:embed quota-events.schema.json
var QuotaEvents []byte
