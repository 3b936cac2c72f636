package schemas

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/quotaflow/billing/internal/event"
)

// exampleBlock is an example in the Kafka document: a marker naming its
// schema, then a JSON block.
var exampleBlock = regexp.MustCompile("(?s)<!-- example of schemas/([a-z-]+\\.schema\\.json) -->\n```json\n(.*?)\n```")

// decoders are the worker's decoders of the topics it reads, by schema.
var decoders = map[string]func(value []byte) error{
	PaymentSucceeded: func(v []byte) error { _, err := event.Decode(nil, v); return err },
	QuotaGrants:      func(v []byte) error { _, err := event.DecodeGrant(nil, v); return err },
	PaymentRefunded:  func(v []byte) error { _, err := event.DecodeRefund(nil, v); return err },
}

// Every schema compiles (against its draft's meta-schema), and every example
// docs/kafka.md gives holds against the schema it names (and the worker's
// decoder, for a topic it reads); each schema has one.
func TestDocumentedExamplesHold(t *testing.T) {
	doc, err := os.ReadFile("../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string]int{}
	for _, m := range exampleBlock.FindAllSubmatch(doc, -1) {
		file, value := string(m[1]), m[2]
		s, err := Compile(file)
		if err != nil {
			t.Errorf("docs/kafka.md: example of %s: %v", file, err)
			continue
		}
		if err := s.Validate(value); err != nil {
			t.Errorf("docs/kafka.md: example of %s breaks it: %v\n%s", file, err, value)
		}
		if decode, ok := decoders[file]; ok {
			if err := decode(value); err != nil {
				t.Errorf("docs/kafka.md: example of %s: the worker refuses it: %v", file, err)
			}
		}
		examples[file]++
	}
	for _, f := range Files() {
		if _, err := Compile(f); err != nil {
			t.Error(err)
		}
		if examples[f] == 0 {
			t.Errorf("docs/kafka.md gives no example of schemas/%s", f)
		}
	}
}

// Each schema's $id is where it is published: base and its file name.
func TestIDs(t *testing.T) {
	for _, f := range Files() {
		b, err := files.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.ID != base+f {
			t.Errorf("%s: $id %q, want %q (%v)", f, s.ID, base+f, err)
		}
	}
}
