package testenv

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// JSONLines fails t unless every non-empty line of out is one JSON object
// whose keys are unique (a strict log pipeline rejects a repeated key), and
// returns the lines decoded.
func JSONLines(t testing.TB, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		d := json.NewDecoder(strings.NewReader(l))
		if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
			t.Errorf("not a JSON object: %s", l)
			continue
		}
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			var v json.RawMessage
			if err == nil {
				err = d.Decode(&v)
			}
			if err != nil {
				t.Errorf("not JSON (%v): %s", err, l)
				break
			}
			if seen[k.(string)] {
				t.Errorf("key %q twice: %s", k, l)
			}
			seen[k.(string)] = true
		}
		var m map[string]any
		if json.NewDecoder(bytes.NewReader([]byte(l))).Decode(&m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}
