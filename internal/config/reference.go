package config

import (
	"bytes"
	"fmt"
	"strings"
)

//go:generate go run ./gendoc -o ../../docs/configuration.md

// groups name the reference's sections, each by the first word of the
// names it holds, in the order they appear.
var groups = []struct {
	title string
	words []string
}{
	{"Kafka", []string{"KAFKA"}},
	{"Redis", []string{"REDIS"}},
	{"MySQL", []string{"MYSQL"}},
	{"HTTP endpoints", []string{"HTTP", "PPROF", "ADMIN"}},
	{"Logs", []string{"LOG"}},
	{"Merchant locks and Snowflake worker IDs", []string{"LOCK", "IDGEN", "POD"}},
	{"Consumption", []string{"WORKER", "SHUTDOWN"}},
	{"Balance events", []string{"QUOTA"}},
	{"Traces (OpenTelemetry)", []string{"OTEL"}},
}

const referenceIntro = `<!-- Generated from internal/config/variables.go by go generate ./internal/config: do not edit. -->
# Configuration

Every program reads the environment (flags may override); a bad value stops the program at start
with a message naming every broken variable and its value, secrets masked. A secret may also come
from a file: ` + "`NAME_FILE`" + ` (a mounted Kubernetes Secret, say) holds what ` + "`NAME`" + ` would; setting both is
an error.
`

const referenceOutro = `
Beyond this table, ` + "`billingctl dlq replay`" + ` keeps its progress files in ` + "`DLQ_STATE_DIR`" + ` (default
` + "`$XDG_STATE_HOME/billing`" + `, else ` + "`~/.local/state/billing`" + `; mount a volume there in a container), and
the OpenTelemetry exporter and SDK read their other standard variables themselves
(` + "`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`, `OTEL_SERVICE_NAME`" + `, ...).
`

// Reference renders the table of variables as the Markdown of
// docs/configuration.md: a section per group, a row per variable.
func Reference() ([]byte, error) {
	sections := make([][]Variable, len(groups))
	for _, v := range variables {
		g := groupOf(v.Name)
		if g < 0 {
			return nil, fmt.Errorf("config: no group of the reference holds %s: add its first word to one", v.Name)
		}
		sections[g] = append(sections[g], v)
	}
	var b bytes.Buffer
	b.WriteString(referenceIntro)
	for i, vars := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n| variable | default | secret | meaning |\n|---|---|---|---|\n", groups[i].title)
		for _, v := range vars {
			def, secret := "—", ""
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			if v.Secret {
				secret = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, secret, strings.ReplaceAll(v.Doc, "|", `\|`))
		}
	}
	b.WriteString(referenceOutro)
	return b.Bytes(), nil
}

// groupOf is the index of the group holding name, or -1.
func groupOf(name string) int {
	word, _, _ := strings.Cut(name, "_")
	for i, g := range groups {
		for _, w := range g.words {
			if w == word {
				return i
			}
		}
	}
	return -1
}
