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
	// Topic is where the message goes. A Refunds message carries Refund
	// (and no Event); Taken and Beyond are its truth if its payment debited
	// its whole amount: what the refund takes of it, what is a conflict.
	Topic         Topic
	Refund        event.RefundCommand
	RefundKind    RefundKind
	Taken, Beyond int64
}

// OccurredAt is when the message's event or refund occurred: its due time.
func (m Message) OccurredAt() time.Time {
	if m.Topic == Refunds {
		return m.Refund.OccurredAt
	}
	return m.Event.OccurredAt
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
	history []Message // ring of recent valid payments, for duplicates and refunds
	left    []int64   // of each payment in history, what refunds have not taken yet
	hnext   int
	// Refunds: recent ones (to re-send), the payments of early refunds
	// (due later), and how many refund ids were made.
	refunds     []Message
	rnext       int
	held        []heldPayment
	refundsMade int
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
	if m, ok := g.nextHeld(); ok {
		return m
	}
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
	case u < g.cfg.Duplicates+g.cfg.Malformed+g.cfg.Refunds:
		return g.refund()
	}
	e := g.newEvent()
	m := Message{Seq: g.seq, Key: []byte(e.MerchantID), Value: e.Encode(), Kind: Valid, Event: e, DuplicateOf: -1}
	g.remember(m, e.Amount)
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
		OccurredAt: g.at(),
	}
}

// at is the occurred_at of the current message.
func (g *Generator) at() time.Time { return g.cfg.Start.Add(g.cfg.Step * time.Duration(g.seq)).UTC() }

func (g *Generator) remember(m Message, left int64) {
	if len(g.history) < duplicateWindow {
		g.history, g.left = append(g.history, m), append(g.left, left)
		return
	}
	g.history[g.hnext], g.left[g.hnext] = m, left
	g.hnext = (g.hnext + 1) % duplicateWindow
}
