package workload

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quotaflow/billing/internal/event"
)

// Kind says what a message is.
type Kind int

// Message kinds.
const (
	Valid     Kind = iota // a new, well-formed event
	Duplicate             // an exact re-emission of an earlier Valid message
	Malformed             // breaks the event contract: event.Decode refuses it
)

// Message is one Kafka message of the stream and the truth about it.
type Message struct {
	Seq   int    // position in the stream, from 0
	Key   []byte // the Kafka key: the merchant id (a "key-mismatch" flaw excepted)
	Value []byte
	Kind  Kind
	// Event is the event the value encodes (Valid, Duplicate), or the event a
	// Malformed value was derived from before it was broken.
	Event event.PaymentSucceeded
	// DuplicateOf is the Seq of the original of a Duplicate, else -1.
	DuplicateOf int
	// Flaw names how a Malformed message is broken ("truncated-json",
	// "bad-amount-zero", ...), else "".
	Flaw string
}

// duplicateWindow is how many recent valid messages a duplicate is drawn from.
const duplicateWindow = 1024

// Generator yields the stream of a Config, one message at a time. It is not
// safe for concurrent use.
type Generator struct {
	cfg     Config
	rng     *rand.Rand
	pick    picker
	seq     int
	fresh   int       // events created so far (valid or malformed): numbers event ids
	history []Message // ring of recent valid messages, for duplicates
	hnext   int
}

// New validates cfg (after defaults) and returns its generator.
func New(cfg Config) (*Generator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	return &Generator{cfg: cfg, rng: rng, pick: newPicker(cfg.Skew, cfg.Merchants, rng), history: make([]Message, 0, duplicateWindow)}, nil
}

// Generate returns the first n messages of cfg's stream.
func Generate(cfg Config, n int) ([]Message, error) {
	g, err := New(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]Message, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out, nil
}

// Config is the generator's configuration with defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Next returns the next message.
func (g *Generator) Next() Message {
	defer func() { g.seq++ }()
	u := g.rng.Float64()
	switch {
	case u < g.cfg.Duplicates:
		if len(g.history) > 0 {
			orig := g.history[g.rng.IntN(len(g.history))]
			return Message{Seq: g.seq, Key: orig.Key, Value: orig.Value, Kind: Duplicate, Event: orig.Event, DuplicateOf: orig.Seq}
		}
		// Nothing to duplicate yet: a valid message, never a malformed one.
	case u < g.cfg.Duplicates+g.cfg.Malformed:
		e := g.newEvent()
		key, value, flaw := g.corrupt(e)
		return Message{Seq: g.seq, Key: key, Value: value, Kind: Malformed, Event: e, DuplicateOf: -1, Flaw: flaw}
	}
	e := g.newEvent()
	m := Message{Seq: g.seq, Key: []byte(e.MerchantID), Value: e.Encode(), Kind: Valid, Event: e, DuplicateOf: -1}
	g.remember(m)
	return m
}

func (g *Generator) newEvent() event.PaymentSucceeded {
	n := strconv.Itoa(g.fresh)
	g.fresh++
	amount := g.cfg.MinAmount
	if span := g.cfg.MaxAmount - g.cfg.MinAmount; span > 0 {
		amount += g.rng.Int64N(span + 1)
	}
	return event.PaymentSucceeded{
		EventID:    g.cfg.IDPrefix + n,
		PaymentID:  "pay-" + g.cfg.IDPrefix + n,
		MerchantID: MerchantID(g.pick()),
		Amount:     amount,
		Source:     [...]event.Source{event.SourcePC, event.SourceMiniApp, event.SourceOpenAPI}[g.rng.IntN(3)],
		OccurredAt: g.cfg.Start.Add(g.cfg.Step * time.Duration(g.seq)).UTC(),
	}
}

func (g *Generator) remember(m Message) {
	if len(g.history) < duplicateWindow {
		g.history = append(g.history, m)
		return
	}
	g.history[g.hnext] = m
	g.hnext = (g.hnext + 1) % duplicateWindow
}
